//! The encoding of what ranks exchange at start-up and at agreed points (device
//! descriptions, build results, kernel facts): length-prefixed fields, native byte order
//! (every rank of a job runs on the same architecture).

#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
}

/// Reads what a `Writer` wrote. A short or malformed message reads as zeros and empty
/// fields: messages come from other ranks of the same build, so that never happens in
/// a working job, and a reader must not panic across the C boundary.
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let end = self.at.saturating_add(n).min(self.buf.len());
        let s = &self.buf[self.at..end];
        self.at = end;
        s
    }
    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let s = self.take(N);
        out[..s.len()].copy_from_slice(s);
        out
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_ne_bytes(self.array())
    }
    pub fn i32(&mut self) -> i32 {
        i32::from_ne_bytes(self.array())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_ne_bytes(self.array())
    }
    pub fn bytes(&mut self) -> Vec<u8> {
        let n = self.u64() as usize;
        self.take(n).to_vec()
    }
    pub fn str(&mut self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }
    pub fn at_end(&self) -> bool {
        self.at >= self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_input() {
        let mut w = Writer::default();
        w.u32(7).i32(-3).u64(1 << 40).bytes(b"abc").str("name");
        let mut r = Reader::new(&w.0);
        assert_eq!(r.u32(), 7);
        assert_eq!(r.i32(), -3);
        assert_eq!(r.u64(), 1 << 40);
        assert_eq!(r.bytes(), b"abc");
        assert_eq!(r.str(), "name");
        assert!(r.at_end());
        let mut short = Reader::new(&w.0[..6]);
        assert_eq!(short.u32(), 7);
        assert_eq!(short.i32(), 0x0000_fffd);
        assert_eq!(short.bytes(), b"");
    }
}
