//! MurmurHash3 x64 128-bit, as Guava's `Hashing.murmur3_128(seed)`; RocketMQ's bloom filter
//! takes the first 64 bits (`asLong()`) of the hash of a UTF-8 key with seed 0.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// The two 64-bit halves `(h1, h2)`; Guava's `asLong()` is `h1`.
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (a, b) = block.split_at(8);
        let k1 = u64::from_le_bytes(a.try_into().expect("8 bytes"));
        let k2 = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        h1 ^= mix_k1(k1);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, &byte) in tail.iter().enumerate() {
        if i < 8 {
            k1 |= u64::from(byte) << (8 * i);
        } else {
            k2 |= u64::from(byte) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        h2 ^= mix_k2(k2);
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(k1);
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

#[cfg(test)]
mod tests {
    use super::murmur3_x64_128;

    /// Vectors from Guava's `Murmur3Hash128Test`.
    #[test]
    fn guava_vectors() {
        let cases: [(u32, u64, u64, &str); 8] = [
            (0, 0x6299_4269_3e10_f867, 0x92db_0b82_baeb_5347, "hell"),
            (1, 0xa78d_dff5_adae_8d10, 0x1289_00ef_2090_0135, "hello"),
            (2, 0x8a48_6b23_f422_e826, 0xf962_a2c5_8947_765f, "hello "),
            (3, 0x2ea5_9f46_6f6b_ed8c, 0xc610_990a_cc42_8a17, "hello w"),
            (4, 0x79f6_305a_386c_572c, 0x4630_5aed_3483_b94e, "hello wo"),
            (5, 0xc221_9d21_3ec1_f1b5, 0xa1d8_e2e0_a527_85bd, "hello wor"),
            (
                0,
                0xe34b_bc7b_bc07_1b6c,
                0x7a43_3ca9_c49a_9347,
                "The quick brown fox jumps over the lazy dog",
            ),
            (
                0,
                0x658c_a970_ff85_269a,
                0x43fe_e3ea_a68e_5c3e,
                "The quick brown fox jumps over the lazy cog",
            ),
        ];
        for (seed, h1, h2, s) in cases {
            assert_eq!(murmur3_x64_128(s.as_bytes(), seed), (h1, h2), "{s:?}");
        }
        assert_eq!(
            murmur3_x64_128("中文查询参数-\u{1F680}".as_bytes(), 0),
            (0x09a3_b843_bee8_3faa, 0x95c2_7d67_7efe_322c)
        );
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
    }
}
