//! RecordBatch validation and decoding, as the broker runs them on a produce and as tools and
//! time lookups run them: `record_batch::validate_all`, then `batch::validate_compressed` with a
//! small decompression bound, then `batch::decode_bounded` with the same bound, on arbitrary
//! bytes.
//!
//! Checked: no panic; `record_batch::parse_all` then `validate_parsed` accepts what
//! `validate_all` accepts; accepted batches exactly cover the input; no batch decodes to more
//! key and value bytes than the bound allows; and a batch the broker accepts, when it decodes,
//! yields exactly the records its header announces (a compressed one at offsets base,
//! base + 1, …).
//! With run.sh's `-malloc_limit_mb`, no allocation far beyond the bound (a zstd frame declaring
//! a 128 MiB window once made validation allocate it).

#![no_main]

use libfuzzer_sys::fuzz_target;
use log_core::batch;

/// Most bytes one batch's records may decompress to here (the broker uses max.message.bytes).
const MAX: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    let whole = record_batch::validate_all(data);
    let stepwise = record_batch::parse_all(data)
        .and_then(|headers| record_batch::validate_parsed(data, &headers).map(|()| headers));
    assert_eq!(whole.as_ref().ok(), stepwise.as_ref().ok(), "{whole:?} / {stepwise:?}");
    let accepted = match whole {
        Ok(headers) => {
            let total: usize = headers.iter().map(|h| h.size as usize).sum();
            assert_eq!(total, data.len(), "accepted batches do not cover the input");
            batch::validate_compressed(data, &headers, MAX)
                .is_ok()
                .then_some(headers)
        }
        Err(_) => None,
    };
    let decoded = batch::decode_bounded(data, MAX);
    let (Some(headers), Ok(records)) = (accepted, decoded) else {
        return;
    };
    let mut records = records.into_iter();
    for header in headers {
        let count = usize::try_from(header.record_count).expect("validated count");
        let batch: Vec<_> = records.by_ref().take(count).collect();
        assert_eq!(batch.len(), count, "batch at offset {}", header.base_offset);
        let bytes: usize = batch
            .iter()
            .map(|r| {
                r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len())
            })
            .sum();
        assert!(
            bytes <= MAX.max(header.size as usize),
            "{bytes} bytes of keys and values from a batch of {}",
            header.size
        );
        if header.is_compressed() {
            for (i, record) in batch.iter().enumerate() {
                assert_eq!(
                    record.offset,
                    header.base_offset.wrapping_add(i as i64),
                    "{header:?}"
                );
            }
        }
    }
    assert!(
        records.next().is_none(),
        "more records than the headers announce"
    );
});
