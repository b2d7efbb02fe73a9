//! C strings in fixed arrays, as rdma-core's structs hold names and paths.

use std::ffi::c_char;

/// Copies `s` into a fixed C array, truncated to leave room for the terminating NUL.
pub fn copy_c_string(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_are_truncated_and_terminated() {
        let mut a = [1 as c_char; 4];
        copy_c_string(&mut a, "mlx5_0");
        assert_eq!(a, [b'm' as c_char, b'l' as c_char, b'x' as c_char, 0]);
        let mut b = [1 as c_char; 8];
        copy_c_string(&mut b, "ab");
        assert_eq!(&b[..3], &[b'a' as c_char, b'b' as c_char, 0]);
    }
}
