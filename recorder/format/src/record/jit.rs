//! JIT symbol maps: a process's `/tmp/perf-PID.map` as `rec` found it on the board when the
//! process exited or the recording ended. JIT runtimes (Node with `--perf-basic-prof`, Java
//! agents, Python 3.12's `-X perf`, LuaJIT) write these files to name code they generate; the
//! host never sees the board's `/tmp`, so the recording carries them.

use crate::codec::{Dec, DecodeError, Enc};

/// One process's JIT map file, verbatim (`START SIZE name` lines, hexadecimal), possibly cut
/// at `rec`'s size bound (then `truncated` is set and the last line may be partial).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitMap {
    /// When `rec` read it (ns, the recording's clock).
    pub time: u64,
    /// The process the map names code for.
    pub pid: u32,
    /// The file's kind: `perf-map` for `/tmp/perf-PID.map`.
    pub kind: String,
    /// The file was longer than `rec`'s bound; only its start is here.
    pub truncated: bool,
    /// The file's bytes.
    pub data: Vec<u8>,
}

impl JitMap {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.str(&self.kind);
        e.bool(self.truncated);
        e.bytes(&self.data);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(JitMap {
            time: d.u64()?,
            pid: d.u32()?,
            kind: d.string()?,
            truncated: d.bool()?,
            data: d.bytes()?.to_vec(),
        })
    }
}
