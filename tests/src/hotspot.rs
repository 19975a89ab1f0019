//! hotspot's own reader, run headless: Debian's `hotspot` package parses and unwinds a
//! `perf.data` in a separate program, `hotspot-perfparser`, which the GUI starts and reads a
//! binary stream from. Running it here and decoding that stream shows exactly what hotspot
//! would display (samples, their frames by symbol, the errors it would raise), without a
//! display.
//!
//! The stream (perfparser 1.3's, as Debian ships it): `QPERFSTREAM\0`, a little-endian `u32`
//! Qt data-stream version, then messages, each a little-endian `u32` length and a Qt data
//! stream (big-endian) that starts with a `u8` event type. Only the leading fields of the
//! messages used here are read, which are the same in every perfparser release since.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// perfparser's `EventType` values read here.
const LOCATION_DEFINITION: u8 = 3;
const SYMBOL_DEFINITION: u8 = 4;
const STRING_DEFINITION: u8 = 5;
const ERROR: u8 = 8;
const SAMPLE: u8 = 13;

/// perfparser's `ErrorCode` for an ELF file it did not find in the sysroot.
pub const MISSING_ELF_FILE: i32 = 2;
/// perfparser's `ErrorCode` for a kernel symbol table it could not read.
pub const INVALID_KALLSYMS: i32 = 3;

/// What hotspot would show of one file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Each sample's frames by function name, innermost first, inlined functions as frames of
    /// their own (`?` where perfparser found no symbol).
    pub samples: Vec<Vec<String>>,
    /// The errors perfparser reported: (code, message).
    pub errors: Vec<(i32, String)>,
}

impl Parsed {
    /// Samples with `name` anywhere in their frames.
    pub fn through(&self, name: &str) -> u64 {
        self.samples
            .iter()
            .filter(|s| s.iter().any(|f| f == name))
            .count() as u64
    }

    /// Samples whose innermost named frame is `name`.
    pub fn leaf(&self, name: &str) -> u64 {
        self.samples
            .iter()
            .filter(|s| s.iter().find(|f| *f != "?").is_some_and(|f| f == name))
            .count() as u64
    }
}

/// Debian's `hotspot-perfparser` (scripts/setup.sh installs the hotspot package).
pub fn perfparser() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("libexec/hotspot-perfparser"))
        .find(|p| p.exists());
    found.expect("hotspot-perfparser (Debian's hotspot package; scripts/setup.sh installs it)")
}

/// Runs hotspot's perfparser on `data` with `sysroot`, as hotspot does when it opens the
/// file, and decodes what it sends.
pub fn parse(data: &Path, sysroot: &Path) -> Parsed {
    let o = Command::new(perfparser())
        .arg("--input")
        .arg(data)
        .arg("--sysroot")
        .arg(sysroot)
        .stdin(Stdio::null())
        .output()
        .expect("run hotspot-perfparser");
    assert!(
        o.status.success(),
        "hotspot-perfparser failed ({:?}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    decode(&o.stdout)
}

/// Opens `data` in the hotspot GUI on a virtual display (Xvfb) with scripts/hotspot-screenshot.sh
/// and saves the window after `seconds` as `png`: the script fails if hotspot did not live
/// that long. Returns the PNG's size in bytes (a window with text in it compresses far worse
/// than an empty screen).
pub fn screenshot(data: &Path, sysroot: &Path, png: &Path, seconds: u32) -> u64 {
    let o = Command::new("bash")
        .arg(crate::root().join("scripts/hotspot-screenshot.sh"))
        .args([data, sysroot, png])
        .arg(seconds.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/hotspot-screenshot.sh");
    assert!(
        o.status.success(),
        "hotspot under Xvfb: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::metadata(png).expect("the screenshot").len()
}

/// A big-endian reader over one message.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().expect("N bytes")
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
    /// A `QByteArray`: a length (all ones for a null array) and the bytes.
    fn bytes(&mut self) -> Vec<u8> {
        let n = u32::from_be_bytes(self.take());
        if n == u32::MAX {
            return Vec::new();
        }
        let (head, rest) = self.0.split_at(n as usize);
        self.0 = rest;
        head.to_vec()
    }
    /// A `QString`: a byte length and UTF-16BE.
    fn string(&mut self) -> String {
        let units: Vec<u16> = self
            .bytes()
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    }
}

/// Decodes perfparser's stream.
pub fn decode(stream: &[u8]) -> Parsed {
    assert!(
        stream.starts_with(b"QPERFSTREAM\0") && stream.len() >= 16,
        "not a perfparser stream"
    );
    let mut rest = &stream[16..];
    let mut strings = HashMap::new();
    let mut symbols = HashMap::new();
    // Location id -> its parent: the location of its function (perfparser names a function
    // once, at its first location), or for an inlined function's, the call site it was
    // inlined at.
    let mut parents = HashMap::new();
    let mut chains = Vec::new();
    let mut parsed = Parsed::default();
    while rest.len() >= 4 {
        let n = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        let (message, tail) = rest[4..].split_at(n);
        rest = tail;
        let mut f = Fields(&message[1..]);
        match message[0] {
            STRING_DEFINITION => {
                let id = f.i32();
                strings.insert(id, String::from_utf8_lossy(&f.bytes()).into_owned());
            }
            SYMBOL_DEFINITION => {
                let id = f.i32();
                symbols.insert(id, f.i32());
            }
            LOCATION_DEFINITION => {
                let id = f.i32();
                let (_address, _file, _pid, _line, _column) =
                    (f.u64(), f.i32(), f.i32(), f.i32(), f.i32());
                parents.insert(id, f.i32());
            }
            ERROR => {
                let code = f.i32();
                parsed.errors.push((code, f.string()));
            }
            SAMPLE => {
                let (_pid, _tid, _time, _cpu) = (f.i32(), f.i32(), f.u64(), f.i32());
                let frames = f.i32();
                chains.push((0..frames).map(|_| f.i32()).collect::<Vec<i32>>());
            }
            _ => {}
        }
    }
    assert!(rest.is_empty(), "a truncated perfparser stream");
    // A frame's function is the first symbol up its chain of parents; when that symbol's own
    // location has a parent, the function was inlined there, and the chain goes on from that
    // call site to the caller's symbol (hotspot shows each as a frame).
    let parent = |l: i32| parents.get(&l).copied().unwrap_or(-1);
    let functions = |frame: &i32| {
        let mut out = Vec::new();
        let mut at = *frame;
        for _ in 0..64 {
            match symbols.get(&at).and_then(|s| strings.get(s)) {
                Some(name) => out.push(name.clone()),
                None if parent(at) != -1 => {
                    at = parent(at);
                    continue;
                }
                None => out.push("?".to_string()),
            }
            at = parent(at);
            if at == -1 {
                break;
            }
        }
        out
    };
    parsed.samples = chains
        .iter()
        .map(|c| c.iter().flat_map(functions).collect())
        .collect();
    parsed
}
