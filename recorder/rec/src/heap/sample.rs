//! `--heap-sample BYTES`: the mean bytes between sampled allocations (see the interposer's
//! `sample` module for how allocations are picked, and hostside for how they are weighed).

/// The smallest mean accepted: below it nearly every allocation is sampled anyway, and the
/// estimates would only add noise to what exact mode records.
pub const MIN_MEAN: u64 = 16;

/// Parses `--heap-sample`'s value: bytes with an optional unit, the units `--max-size`
/// takes (`512KiB`, `1M`; K, M, G are powers of 1000, KiB, MiB, GiB of 1024). Not
/// `segments::parse_size` itself: that one insists on `--max-size`'s minimum.
pub fn parse(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("--heap-sample {s}: give a number of bytes, e.g. 512KiB"))?;
    let mult: u64 = match unit {
        "" => 1,
        "K" | "k" | "KB" | "kB" => 1000,
        "M" | "MB" => 1000 * 1000,
        "G" | "GB" => 1000 * 1000 * 1000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => {
            return Err(format!(
                "--heap-sample {s}: unknown unit {unit:?} (K, M, G, KiB, MiB, GiB)"
            ))
        }
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("--heap-sample {s}: too large"))?;
    if bytes < MIN_MEAN {
        return Err(format!("--heap-sample {s}: at least {MIN_MEAN} bytes"));
    }
    Ok(bytes)
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
