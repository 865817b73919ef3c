//! Decompressing a batch's records with a bound on the output, so a small batch cannot expand
//! without limit (a decompression bomb). Gzip and LZ4 streams are read through `Read::take`, so
//! no more than the bound (plus one byte, to tell "too large") is ever produced; zstd is
//! decompressed in one pass into a buffer of that size (its streaming decoder would allocate the
//! window the frame declares, up to 128 MiB, whatever the bound). Snappy, as
//! Kafka's clients write it, is xerial-framed blocks of raw snappy whose decompressed length is
//! checked before any block is decompressed.

use std::io::Read;

use bytes::Bytes;
use kafka_protocol::records::Compression;

/// Why a batch's records could not be decompressed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DecompressError {
    /// The records decompress to more than the bound the caller set.
    #[error("records decompress to more than {max} bytes")]
    TooLarge {
        /// The bound, in bytes.
        max: usize,
    },
    /// The codec failed on the bytes.
    #[error("{codec} records cannot be decompressed: {reason}")]
    Codec {
        /// The codec's name (`gzip`, `snappy`, `lz4`, `zstd`).
        codec: &'static str,
        /// The codec's error.
        reason: String,
    },
}

/// xerial's snappy framing: a 16-byte header, then blocks of (big-endian u32 length, block).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;

/// The records of a batch (`data`: what follows the batch header), decompressed, at most `max`
/// bytes.
pub fn decompress(
    data: &[u8],
    compression: Compression,
    max: usize,
) -> Result<Bytes, DecompressError> {
    let codec = |codec: &'static str| {
        move |e: std::io::Error| DecompressError::Codec {
            codec,
            reason: e.to_string(),
        }
    };
    match compression {
        Compression::None => bounded(data, max, "none"),
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(data), max, "gzip"),
        Compression::Zstd => zstd(data, max),
        Compression::Lz4 => {
            read_bounded(lz4::Decoder::new(data).map_err(codec("lz4"))?, max, "lz4")
        }
        Compression::Snappy => snappy(data, max),
    }
}

fn bounded(data: &[u8], max: usize, _codec: &'static str) -> Result<Bytes, DecompressError> {
    if data.len() > max {
        return Err(DecompressError::TooLarge { max });
    }
    Ok(Bytes::copy_from_slice(data))
}

fn read_bounded(
    reader: impl Read,
    max: usize,
    codec: &'static str,
) -> Result<Bytes, DecompressError> {
    let mut out = Vec::new();
    reader
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| DecompressError::Codec {
            codec,
            reason: e.to_string(),
        })?;
    if out.len() > max {
        return Err(DecompressError::TooLarge { max });
    }
    Ok(out.into())
}

/// Zstd in one pass into a buffer of at most `max + 1` bytes, which is all the memory the
/// decoder works in besides its context: a streaming decoder would allocate the window the frame
/// declares (128 MiB for a frame of ten bytes), whatever the bound on the output.
fn zstd(data: &[u8], max: usize) -> Result<Bytes, DecompressError> {
    use zstd::zstd_safe::{self, zstd_sys};
    let fail = |reason: &str| DecompressError::Codec {
        codec: "zstd",
        reason: reason.to_string(),
    };
    let bound = max.saturating_add(1);
    // A frame that says how large it is needs no more than that (a lie is caught by the
    // decoder, which checks the size it produced).
    let first = match zstd_safe::get_frame_content_size(data) {
        Ok(Some(size)) if size > max as u64 => return Err(DecompressError::TooLarge { max }),
        Ok(Some(size)) => size as usize,
        _ => bound,
    };
    let mut context = zstd_safe::DCtx::try_create().ok_or_else(|| fail("out of memory"))?;
    for capacity in [first, bound] {
        let mut out = Vec::with_capacity(capacity);
        match context.decompress(&mut out, data) {
            Ok(_) if out.len() > max => break,
            Ok(_) => return Ok(out.into()),
            // SAFETY: ZSTD_getErrorCode only classifies the number it is given.
            Err(code)
                if unsafe { zstd_sys::ZSTD_getErrorCode(code) }
                    == zstd_sys::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall => {}
            Err(code) => return Err(fail(zstd_safe::get_error_name(code))),
        }
    }
    Err(DecompressError::TooLarge { max })
}

fn snappy(data: &[u8], max: usize) -> Result<Bytes, DecompressError> {
    let fail = |reason: String| DecompressError::Codec {
        codec: "snappy",
        reason,
    };
    let raw = |block: &[u8], out: &mut Vec<u8>| -> Result<(), DecompressError> {
        let len = snap::raw::decompress_len(block).map_err(|e| fail(e.to_string()))?;
        if out.len() + len > max {
            return Err(DecompressError::TooLarge { max });
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(|e| fail(e.to_string()))?;
        Ok(())
    };
    let mut out = Vec::new();
    if !data.starts_with(&XERIAL_MAGIC) {
        // Raw snappy, as the Java client falls back to as well.
        raw(data, &mut out)?;
        return Ok(out.into());
    }
    let mut rest = data
        .get(XERIAL_HEADER..)
        .ok_or_else(|| fail("short xerial header".into()))?;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| fail("truncated block length".into()))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail
            .get(..len)
            .ok_or_else(|| fail("truncated block".into()))?;
        raw(block, &mut out)?;
        rest = &tail[len..];
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found with the `record_batch` fuzz target's allocation limit: a 71-byte batch whose zstd
    /// frame declared a 128 MiB window made validation allocate that window (streaming
    /// decoders allocate what the frame declares), whatever the bound on the output.
    #[test]
    fn zstd_takes_the_bound_not_the_window_a_frame_declares() {
        // One raw block of one byte, no content size, a window of 2^27 and of 2^31 bytes (past
        // what a streaming decoder accepts at all).
        for window_log in [27u8, 31] {
            let frame = [
                0x28,
                0xB5,
                0x2F,
                0xFD,
                0x00,
                (window_log - 10) << 3,
                0x09,
                0x00,
                0x00,
                b'a',
            ];
            assert_eq!(
                decompress(&frame, Compression::Zstd, 100),
                Ok(Bytes::from_static(b"a")),
                "window 2^{window_log}"
            );
        }
    }

    #[test]
    fn every_codec_is_bounded() {
        let plain = vec![b'a'; 100_000];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &plain).unwrap();
        let gz = gz.finish().unwrap();
        let zst = zstd::encode_all(&plain[..], 3).unwrap();
        let snappy = snap::raw::Encoder::new().compress_vec(&plain).unwrap();
        let mut lz = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        std::io::Write::write_all(&mut lz, &plain).unwrap();
        let (lz, done) = lz.finish();
        done.unwrap();
        for (codec, data) in [
            (Compression::Gzip, &gz),
            (Compression::Zstd, &zst),
            (Compression::Snappy, &snappy),
            (Compression::Lz4, &lz),
        ] {
            assert_eq!(
                decompress(data, codec, 100_000).unwrap(),
                plain,
                "{codec:?}"
            );
            assert_eq!(
                decompress(data, codec, 99_999),
                Err(DecompressError::TooLarge { max: 99_999 }),
                "{codec:?}"
            );
            assert!(data.len() < 10_000, "{codec:?} compressed {}", data.len());
        }
        assert!(matches!(
            decompress(b"not gzip at all", Compression::Gzip, 1000),
            Err(DecompressError::Codec { .. })
        ));
    }
}
