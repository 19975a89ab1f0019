//! The kernel's build configuration, for `rec --check` to name the options behind what is
//! missing: from `--kernel-config FILE` (a `.config` copied from the build, plain or gzip),
//! else `/proc/config.gz` (CONFIG_IKCONFIG_PROC), else `/boot/config-RELEASE` (where
//! distributions install it).
//!
//! `/proc/config.gz` is gzip. rec decodes it with `miniz_oxide`'s inflater alone (the
//! deflate decoder flate2 uses by default) and checks the gzip header and CRC itself:
//! flate2's reader machinery and crc32fast would add to a binary that must stay small for
//! boards' flash, for one file read once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::options::{self, Capability, Requirement};

/// A kernel configuration: the value of every `CONFIG_` option it sets.
pub struct Config {
    /// Where it was read, for the report.
    pub source: String,
    /// Option name without `CONFIG_` to its value (`y`, `m`, a number or a string).
    values: HashMap<String, String>,
}

impl Config {
    /// Parses `.config` text: `CONFIG_X=value` lines count, `# CONFIG_X is not set` and
    /// everything else are absent options.
    pub fn parse(source: String, text: &str) -> Config {
        let values = text
            .lines()
            .filter_map(|l| l.strip_prefix("CONFIG_")?.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect();
        Config { source, values }
    }

    /// Whether `name` (without `CONFIG_`) is built in or a module.
    pub fn enabled(&self, name: &str) -> bool {
        matches!(self.values.get(name).map(String::as_str), Some("y" | "m"))
    }

    /// Whether `r` exists for this configuration's architecture.
    fn applies(&self, r: &Requirement) -> bool {
        r.arches.is_empty() || r.arches.iter().any(|a| self.enabled(a))
    }

    /// The options `capability` needs that this configuration lacks.
    pub fn missing(&self, capability: Capability) -> Vec<&'static Requirement> {
        options::of(capability)
            .filter(|r| self.applies(r) && !self.enabled(r.name))
            .collect()
    }

    /// Every option some capability needs that this configuration lacks, once each.
    pub fn all_missing(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for r in options::REQUIREMENTS {
            if self.applies(r) && !self.enabled(r.name) && !names.contains(&r.name) {
                names.push(r.name);
            }
        }
        names
    }
}

/// The configuration to check: `explicit` when given (an error if unreadable: the user
/// asked for it), else the running kernel's, else `Err` with what was tried.
pub fn find(explicit: Option<&Path>, release: &str) -> Result<Config, Found> {
    if let Some(p) = explicit {
        return read(p).map_err(|e| Found::Unreadable(format!("{}: {e}", p.display())));
    }
    let boot = PathBuf::from(format!("/boot/config-{release}"));
    let mut tried = Vec::new();
    for p in [Path::new("/proc/config.gz"), boot.as_path()] {
        match read(p) {
            Ok(c) => return Ok(c),
            Err(e) => tried.push(format!("{}: {e}", p.display())),
        }
    }
    Err(Found::Nothing(tried.join(", ")))
}

/// Why there is no configuration to check.
pub enum Found {
    /// `--kernel-config FILE` could not be read: the message.
    Unreadable(String),
    /// Neither /proc/config.gz nor /boot/config-RELEASE could be read: why, for each.
    Nothing(String),
}

fn read(p: &Path) -> Result<Config, String> {
    let raw = std::fs::read(p).map_err(|e| e.to_string())?;
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        gunzip(&raw)?
    } else {
        raw
    };
    Ok(Config::parse(
        p.display().to_string(),
        &String::from_utf8_lossy(&text),
    ))
}

/// Largest configuration accepted: a kernel's is about 300 KB.
const MAX_CONFIG: usize = 16 << 20;

/// Decodes a single-member gzip file (RFC 1952), checking its CRC and length.
fn gunzip(data: &[u8]) -> Result<Vec<u8>, String> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let bad = |what: &str| format!("not a gzip file the kernel writes: {what}");
    if data.len() < 18 || data[2] != 8 {
        return Err(bad("too short or not deflate"));
    }
    let flags = data[3];
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let len = data
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or_else(|| bad("cut in its header"))?;
        at += 2 + len;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let end = data
                .get(at..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .ok_or_else(|| bad("cut in its header"))?;
            at += end + 1;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    let trailer = data.len() - 8;
    let body = data
        .get(at..trailer)
        .ok_or_else(|| bad("cut in its header"))?;
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_CONFIG)
        .map_err(|e| bad(&format!("deflate data damaged ({:?})", e.status)))?;
    let word = |i: usize| u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
    if word(trailer) != crc32(&out) || word(trailer + 4) != out.len() as u32 {
        return Err(bad("CRC or length does not match"));
    }
    Ok(out)
}

/// CRC-32 as gzip computes it (bit by bit: rec reads one small file).
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8], name: Option<&str>) -> Vec<u8> {
        let mut out = vec![
            0x1f,
            0x8b,
            8,
            if name.is_some() { 8 } else { 0 },
            0,
            0,
            0,
            0,
            2,
            3,
        ];
        if let Some(n) = name {
            out.extend_from_slice(n.as_bytes());
            out.push(0);
        }
        out.extend(miniz_oxide::deflate::compress_to_vec(data, 9));
        out.extend(crc32(data).to_le_bytes());
        out.extend((data.len() as u32).to_le_bytes());
        out
    }

    const TEXT: &str = "CONFIG_ARM64=y\nCONFIG_PERF_EVENTS=y\n# CONFIG_KALLSYMS is not set\n\
                        CONFIG_IKCONFIG=m\nCONFIG_HZ=250\nCONFIG_FTRACE=n\n";

    #[test]
    fn gzip_round_trip_and_damage() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        for name in [None, Some(".config")] {
            let z = gzip(TEXT.as_bytes(), name);
            assert_eq!(gunzip(&z).unwrap(), TEXT.as_bytes());
            let mut broken = z.clone();
            let n = broken.len();
            broken[n - 6] ^= 1;
            assert!(gunzip(&broken).is_err());
            assert!(gunzip(&z[..z.len() / 2]).is_err());
        }
        assert!(gunzip(&[0x1f, 0x8b]).is_err());
    }

    #[test]
    fn values_and_missing_options() {
        let c = Config::parse("t".into(), TEXT);
        assert!(c.enabled("PERF_EVENTS") && c.enabled("IKCONFIG"));
        assert!(!c.enabled("KALLSYMS") && !c.enabled("FTRACE") && !c.enabled("HZ"));
        let names = |v: Vec<&Requirement>| v.iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(c.missing(Capability::KernelSymbols)), ["KALLSYMS"]);
        assert_eq!(
            names(c.missing(Capability::KernelConfig)),
            ["IKCONFIG_PROC"]
        );
        // ARM_PMU applies to this ARM64 configuration, the RISC-V PMU does not.
        assert_eq!(names(c.missing(Capability::HardwarePmu)), ["ARM_PMU"]);
        let all = c.all_missing();
        assert_eq!(all.iter().filter(|n| **n == "FTRACE").count(), 1);
        assert!(!all.contains(&"PERF_EVENTS") && !all.contains(&"RISCV_PMU_SBI"));
    }
}
