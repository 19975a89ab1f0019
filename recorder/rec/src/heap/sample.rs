//! `--heap-sample BYTES`: the mean bytes between sampled allocations (see the interposer's
//! `sample` module for how allocations are picked, and hostside for how they are weighed).

/// The smallest mean accepted: below it nearly every allocation is sampled anyway, and the
/// estimates would only add noise to what exact mode records.
pub const MIN_MEAN: u64 = 16;

/// Parses `--heap-sample`'s value: bytes with an optional unit, the units `--max-size`
/// takes (`512KiB`, `1M`), at least [`MIN_MEAN`].
pub fn parse(s: &str) -> Result<u64, String> {
    crate::segments::parse_bytes("--heap-sample", s, MIN_MEAN, "16 bytes")
}

/// `--heap-sample` only means something with `--heap`.
pub fn check(heap: bool, sample: Option<u64>) -> Result<(), String> {
    match (heap, sample) {
        (false, Some(_)) => Err("--heap-sample samples heap allocations: add --heap".into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_units() {
        assert_eq!(parse("512KiB"), Ok(512 * 1024));
        assert_eq!(parse("1M"), Ok(1_000_000));
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("1KiB"), Ok(1024));
        assert_eq!(parse("64"), Ok(64));
        assert!(parse("8").unwrap_err().contains("at least"));
        assert!(parse("12parsecs").unwrap_err().contains("--heap-sample"));
        assert!(parse("x").unwrap_err().contains("--heap-sample"));
        assert!(check(false, Some(1)).is_err() && check(true, Some(1)).is_ok());
    }
}
