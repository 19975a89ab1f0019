//! JIT symbol maps: a process's `/tmp/perf-PID.map` and `jit-PID.dump` files as `rec` found
//! them on the board when the process exited or the recording ended. JIT runtimes (Node with
//! `--perf-basic-prof` or `--perf-prof`, Java agents, Python 3.12's `-X perf`, LuaJIT) write
//! these files to name code they generate; the host never sees the board's files, so the
//! recording carries them.

use crate::codec::{Dec, DecodeError, Enc};

/// One process's JIT map file, or a piece of one, verbatim, possibly cut at `rec`'s size bound
/// (then `truncated` is set and the last line or record may be partial).
///
/// A perf map (`START SIZE name` lines, hexadecimal) comes whole in one record. A jitdump
/// (binary, perf's `jitdump-specification.txt`) comes in pieces of at most a mebibyte, in file
/// order, each saying where in the file it starts, so neither side holds a large file at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitMap {
    /// When `rec` read it (ns, the recording's clock).
    pub time: u64,
    /// The process the map names code for.
    pub pid: u32,
    /// The file's kind: `perf-map` for `/tmp/perf-PID.map`, `jitdump` for `jit-PID.dump`.
    pub kind: String,
    /// The file was longer than `rec`'s bound; only its start is here.
    pub truncated: bool,
    /// The file's bytes (from `offset` on).
    pub data: Vec<u8>,
    /// The file's path on the board (appended field; empty in older files and for perf maps).
    pub path: String,
    /// Where in the file `data` starts (appended field; 0 in older files).
    pub offset: u64,
    /// The file's size on the board when `rec` read it (appended field; 0 when unknown): with
    /// `truncated`, says how many bytes the bound cut.
    pub file_size: u64,
}

/// Whether `path` names a jitdump file: `jit-<digits>.dump`, perf's convention. A mapping of
/// such a file is a JIT runtime's marker (it maps its dump once so the profiler finds it), not
/// code: `rec` carries the file, `hostside` does not look for it as a module.
pub fn is_jitdump(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.strip_prefix("jit-")
        .and_then(|n| n.strip_suffix(".dump"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl JitMap {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.str(&self.kind);
        e.bool(self.truncated);
        e.bytes(&self.data);
        e.str(&self.path);
        e.u64(self.offset);
        e.u64(self.file_size);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let mut j = JitMap {
            time: d.u64()?,
            pid: d.u32()?,
            kind: d.string()?,
            truncated: d.bool()?,
            data: d.bytes()?.to_vec(),
            path: String::new(),
            offset: 0,
            file_size: 0,
        };
        // Appended fields; older files end before them.
        if d.remaining() > 0 {
            j.path = d.string()?;
            j.offset = d.u64()?;
            j.file_size = d.u64()?;
        }
        Ok(j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_from_before_the_appended_fields_still_decodes() {
        let mut buf = Vec::new();
        let e = &mut Enc::new(&mut buf);
        e.u64(9);
        e.u64(77);
        e.str("perf-map");
        e.bool(false);
        e.bytes(b"1000 10 f\n");
        let j = JitMap::decode(&mut Dec::new(&buf)).unwrap();
        assert_eq!(
            (j.pid, j.kind.as_str(), j.data.as_slice(), j.path.as_str()),
            (77, "perf-map", &b"1000 10 f\n"[..], "")
        );
        assert_eq!((j.offset, j.file_size), (0, 0));
    }
}
