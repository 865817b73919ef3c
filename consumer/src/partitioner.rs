//! Key → partition, bit for bit as the Java Kafka client's default partitioner, so a key lands
//! on the same partition whichever client wrote it.

/// Kafka's `Utils.murmur2`: MurmurHash2, 32-bit, seed `0x9747b28c`, as the Java client computes
/// it (signed result).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java hashes `int length`; keys are far below 2 GiB, so the cast is exact.
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if tail.len() == 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on `i32::MIN`).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition the Java client's default partitioner picks for a non-null `key`:
/// `toPositive(murmur2(key)) % partitions`. `partitions` must be at least 1.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    to_positive(murmur2(key)) as u32 % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from Apache Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn matches_the_java_client() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key), expected, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partition_uses_to_positive_modulo() {
        // toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16.
        assert_eq!(partition_for_key(b"foobar", 50), 16);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        for n in [1u32, 3, 6, 1000] {
            assert!(partition_for_key(b"any key", n) < n);
        }
    }
}
