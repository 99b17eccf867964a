//! Byte buffers that grow as a `Vec` grows (doubling, so appends stay cheap) but whose capacity
//! never passes their bound: a buffer bounded in bytes holds at most its bound, not up to twice it.

/// Makes room in `buf` for `more` bytes, doubling its capacity as `Vec` would, but to no more
/// than `max` (or exactly what is needed, when that is more).
pub(crate) fn reserve_within(buf: &mut Vec<u8>, more: usize, max: usize) {
    let need = buf.len() + more;
    if need > buf.capacity() {
        let want = (buf.capacity() * 2).clamp(need, max.max(need));
        buf.reserve_exact(want - buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::reserve_within;

    #[test]
    fn a_buffer_doubles_but_never_past_its_bound() {
        let mut buf = Vec::new();
        for _ in 0..100 {
            reserve_within(&mut buf, 10, 300);
            buf.extend_from_slice(&[0; 10]);
            assert!(buf.capacity() <= 300.max(buf.len()), "{}", buf.capacity());
        }
        assert_eq!(buf.len(), 1000);
    }
}
