//! Zigzag varints, as a v2 record writes its lengths, deltas and counts (Kafka's varint and
//! varlong alike: the same encoding, up to 5 or 10 bytes).

use bytes::BufMut;

/// Most bytes a varlong takes.
pub const MAX_LEN: usize = 10;

/// The varint at the start of `buf`: its value and the bytes after it. `None` if `buf` ends
/// inside it or it runs past [`MAX_LEN`] bytes.
#[inline]
pub fn read(buf: &[u8]) -> Option<(i64, &[u8])> {
    let mut raw = 0u64;
    for (i, byte) in buf.iter().enumerate().take(MAX_LEN) {
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let value = (raw >> 1) as i64 ^ -((raw & 1) as i64);
            return Some((value, &buf[i + 1..]));
        }
    }
    None
}

/// Bytes `v` takes as a varint.
#[inline]
pub fn len(v: i64) -> usize {
    // 7 bits a byte; 0 still takes one.
    let bits = 64 - (zigzag(v) | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Writes `v` as a varint.
#[inline]
pub fn put<B: BufMut + ?Sized>(buf: &mut B, v: i64) {
    let mut z = zigzag(v);
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn known_encodings() {
        let cases: [(i64, &[u8]); 6] = [
            (0, &[0]),
            (-1, &[1]),
            (1, &[2]),
            (63, &[0x7e]),
            (64, &[0x80, 1]),
            (-65, &[0x81, 1]),
        ];
        for (v, bytes) in cases {
            let mut buf = Vec::new();
            put(&mut buf, v);
            assert_eq!(buf, bytes, "{v}");
            assert_eq!(len(v), bytes.len());
            assert_eq!(read(bytes), Some((v, &[][..])));
        }
        assert_eq!(len(i64::MIN), MAX_LEN);
        assert_eq!(read(&[0x80]), None, "ends inside");
        assert_eq!(read(&[0xff; 11]), None, "too long");
    }

    proptest! {
        #[test]
        fn round_trips(v in any::<i64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut buf = Vec::new();
            put(&mut buf, v);
            prop_assert_eq!(buf.len(), len(v));
            buf.extend_from_slice(&tail);
            prop_assert_eq!(read(&buf), Some((v, &tail[..])));
        }
    }
}
