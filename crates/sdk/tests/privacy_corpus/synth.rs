//! A seeded generator of synthetic strings: the corpus is the same on every run,
//! and no secret-shaped literal sits in the source (each is assembled at run time,
//! so push-protection scanners have nothing to match).

/// splitmix64: small, deterministic, good enough to fill token bodies.
pub(crate) struct Rng(u64);

pub(crate) const DIGITS: &str = "0123456789";
pub(crate) const HEX: &str = "0123456789abcdef";
pub(crate) const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
pub(crate) const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
pub(crate) const UPPER_DIGITS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
pub(crate) const LOWER_DIGITS: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
pub(crate) const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub(crate) const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub(crate) const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// base64url without a leading or trailing `-`/`_` problem: callers that need a
/// clean word boundary use [`Rng::body`].
pub(crate) const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }

    /// `n` characters drawn from `charset`.
    pub(crate) fn s(&mut self, charset: &str, n: usize) -> String {
        let chars: Vec<char> = charset.chars().collect();
        (0..n).map(|_| *self.pick(&chars)).collect()
    }

    /// `n` characters from `charset`, first and last alphanumeric (a real token's
    /// body may end in `-`, but then a test would be measuring `\b`, not the rule).
    pub(crate) fn body(&mut self, charset: &str, n: usize) -> String {
        let mut out = self.s(charset, n);
        if n >= 2 {
            out.replace_range(0..1, &self.s(ALNUM, 1));
            out.replace_range(n - 1..n, &self.s(ALNUM, 1));
        }
        out
    }

    /// `lo..=hi` characters drawn from `charset`.
    pub(crate) fn sn(&mut self, charset: &str, lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.s(charset, n)
    }

    /// [`Rng::body`] of `lo..=hi` characters.
    pub(crate) fn bodyn(&mut self, charset: &str, lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.body(charset, n)
    }

    pub(crate) fn uuid(&mut self) -> String {
        format!(
            "{}-{}-4{}-{}{}-{}",
            self.s(HEX, 8),
            self.s(HEX, 4),
            self.s(HEX, 3),
            self.pick(&["8", "9", "a", "b"]),
            self.s(HEX, 3),
            self.s(HEX, 12)
        )
    }
}

/// The Luhn check digit that completes `partial`.
pub(crate) fn luhn_complete(partial: &str) -> String {
    let digits: Vec<u32> = partial.chars().filter_map(|c| c.to_digit(10)).collect();
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    format!("{partial}{}", (10 - sum % 10) % 10)
}

/// An IBAN with correct ISO 13616 check digits for `country` and `bban`.
pub(crate) fn iban(country: &str, bban: &str) -> String {
    let rearranged = format!("{bban}{country}00");
    let check = 98 - mod97(&rearranged);
    format!("{country}{check:02}{bban}")
}

/// The ISO 7064 mod-97 of an alphanumeric string (letters count as 10..35).
pub(crate) fn mod97(text: &str) -> u32 {
    text.chars().fold(0u32, |acc, c| {
        let v = c.to_digit(36).expect("alphanumeric");
        if v >= 10 {
            (acc * 100 + v) % 97
        } else {
            (acc * 10 + v) % 97
        }
    })
}

/// The Verhoeff check digit that completes `partial` (Aadhaar numbers use it).
pub(crate) fn verhoeff_complete(partial: &str) -> String {
    const D: [[u8; 10]; 10] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
        [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
        [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
        [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
        [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
        [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
        [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
        [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
    ];
    const P: [[u8; 10]; 8] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
        [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
        [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
        [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
        [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
        [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
        [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
    ];
    const INV: [u8; 10] = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9];
    let mut c = 0u8;
    for (i, d) in partial
        .chars()
        .rev()
        .filter_map(|c| c.to_digit(10))
        .enumerate()
    {
        c = D[c as usize][P[(i + 1) % 8][d as usize] as usize];
    }
    format!("{partial}{}", INV[c as usize])
}
