//! Compressing a batch's records, for the broker's recompression to a topic's
//! `compression.type` (`crate::recompress`), in the framings Kafka's clients read: gzip
//! streams, xerial-framed snappy (32 KiB blocks, as snappy-java writes), LZ4 frames of
//! independent 64 KiB blocks (Kafka's reader refuses dependent blocks), zstd frames that say
//! their content size. Levels are KIP-390's (`CompressionLevels`).

use std::io::Write;

use record_batch::Codec;

/// Why records could not be compressed (a codec failing on its own input: not the client's
/// fault).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{codec} compression failed: {reason}")]
pub struct CompressError {
    /// The codec's name (`gzip`, `snappy`, `lz4`, `zstd`).
    pub codec: &'static str,
    /// The codec's error.
    pub reason: String,
}

/// xerial's snappy framing: magic, version 1, compatible version 1.
const XERIAL_HEADER: [u8; 16] = [
    0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
];
/// snappy-java's block size.
const XERIAL_BLOCK: usize = 32 * 1024;
/// Kafka's level for its fast LZ4 compressor; any other level is LZ4 HC at that level.
const LZ4_FAST_LEVEL: i32 = 9;

/// Appends `data` compressed with `codec` at `level` to `out` (`Codec::None` copies it).
pub fn compress(
    data: &[u8],
    codec: Codec,
    level: i32,
    out: &mut Vec<u8>,
) -> Result<(), CompressError> {
    let fail = |codec: &'static str| {
        move |e: std::io::Error| CompressError {
            codec,
            reason: e.to_string(),
        }
    };
    match codec {
        Codec::None => out.extend_from_slice(data),
        Codec::Gzip => {
            // -1 is Deflater's default, level 6.
            let level = u32::try_from(level).unwrap_or(6).min(9);
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
            encoder.write_all(data).map_err(fail("gzip"))?;
            encoder.finish().map_err(fail("gzip"))?;
        }
        Codec::Snappy => {
            out.extend_from_slice(&XERIAL_HEADER);
            let mut encoder = snap::raw::Encoder::new();
            for block in data.chunks(XERIAL_BLOCK) {
                let at = out.len();
                out.resize(at + 4 + snap::raw::max_compress_len(block.len()), 0);
                let n = encoder
                    .compress(block, &mut out[at + 4..])
                    .map_err(|e| CompressError {
                        codec: "snappy",
                        reason: e.to_string(),
                    })?;
                let len = u32::try_from(n).map_err(|_| CompressError {
                    codec: "snappy",
                    reason: "block too large".into(),
                })?;
                out[at..at + 4].copy_from_slice(&len.to_be_bytes());
                out.truncate(at + 4 + n);
            }
        }
        Codec::Lz4 => {
            // liblz4's frame levels: 0 fast, 3..=12 HC (higher taken as 12).
            let level = if level == LZ4_FAST_LEVEL {
                0
            } else {
                u32::try_from(level).unwrap_or(0)
            };
            let mut encoder = lz4::EncoderBuilder::new()
                .level(level)
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .build(out)
                .map_err(fail("lz4"))?;
            encoder.write_all(data).map_err(fail("lz4"))?;
            let (_, done) = encoder.finish();
            done.map_err(fail("lz4"))?;
        }
        Codec::Zstd => {
            let frame = zstd::bulk::compress(data, level).map_err(fail("zstd"))?;
            out.extend_from_slice(&frame);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::Compression;

    use super::*;
    use crate::decompress::decompress;

    #[test]
    fn every_codec_round_trips_at_its_levels() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for (codec, compression, levels) in [
            (Codec::Gzip, Compression::Gzip, &[-1, 1, 9][..]),
            (Codec::Snappy, Compression::Snappy, &[0][..]),
            (Codec::Lz4, Compression::Lz4, &[9, 1, 12, 17][..]),
            (Codec::Zstd, Compression::Zstd, &[3, -5, 1, 19][..]),
        ] {
            for &level in levels {
                let mut out = vec![7u8];
                compress(&data, codec, level, &mut out).unwrap();
                assert_eq!(out[0], 7, "appended after what was there");
                let back = decompress(&out[1..], compression, data.len()).unwrap();
                assert_eq!(&back[..], &data[..], "{codec:?} level {level}");
            }
        }
    }

    #[test]
    fn snappy_is_xerial_framed_and_lz4_blocks_are_independent() {
        let mut out = Vec::new();
        compress(&[1; 100_000], Codec::Snappy, 0, &mut out).unwrap();
        assert_eq!(out[..16], XERIAL_HEADER);
        let mut out = Vec::new();
        compress(&[1; 100], Codec::Lz4, 9, &mut out).unwrap();
        // Frame magic, then FLG: version 01, block independence set.
        assert_eq!(out[..4], [0x04, 0x22, 0x4D, 0x18]);
        assert_eq!(out[4] & 0xC0, 0x40);
        assert_ne!(out[4] & 0x20, 0, "independent blocks");
    }
}
