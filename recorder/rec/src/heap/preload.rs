//! What `rec --heap` needs before launching: the interposer library (next to rec, in
//! `../lib/crossprof/` as installed, or `CROSSPROF_HEAP_LIB`), a program that can be
//! preloaded at all (one with an ELF interpreter), and the environment that makes the
//! program and everything it starts load the library and find rec.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::RecError;

/// File name of the interposer.
pub const LIB_NAME: &str = "libcrossprof_heap.so";
/// Environment override for the interposer's path.
pub const ENV_LIB: &str = "CROSSPROF_HEAP_LIB";

/// Finds the interposer.
pub fn find_library() -> Result<PathBuf, RecError> {
    if let Some(p) = std::env::var_os(ENV_LIB) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(RecError::HeapLibrary(format!(
                "{ENV_LIB}={} does not exist",
                p.display()
            )))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| RecError::HeapLibrary(format!("cannot locate rec itself: {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [
        dir.join(LIB_NAME),
        dir.join("../lib/crossprof").join(LIB_NAME),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            RecError::HeapLibrary(format!(
                "{LIB_NAME} not found next to rec or in ../lib/crossprof/ (or set {ENV_LIB})"
            ))
        })
}

/// Whether the ELF file at `path` has a program interpreter (is dynamically linked). Scripts
/// (`#!`) and unreadable files count as dynamic: their interpreter decides.
pub fn is_static_elf(path: &Path) -> bool {
    let mut head = Vec::new();
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(64 << 10).read_to_end(&mut head).is_err() || !head.starts_with(b"\x7fELF") {
        return false;
    }
    !has_interp(&head).unwrap_or(true)
}

/// Whether the ELF file at `lib` is for another machine (`e_machine`) than rec itself: an
/// interposer meant for an emulated program (`qemu-riscv64-static -L SYSROOT ./app` under an
/// x86_64 rec). `false` when either cannot be read.
pub fn for_another_machine(lib: &Path) -> bool {
    match (elf_machine(lib), elf_machine(Path::new("/proc/self/exe"))) {
        (Some(theirs), Some(ours)) => theirs != ours,
        _ => false,
    }
}

/// The `e_machine` of the ELF file at `path`.
fn elf_machine(path: &Path) -> Option<u16> {
    let mut head = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    if !head.starts_with(b"\x7fELF") {
        return None;
    }
    let b = [head[18], head[19]];
    Some(if head[5] == 2 {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    })
}

/// Parses the program headers for PT_INTERP. `None` when they are not in `elf`.
pub fn has_interp(elf: &[u8]) -> Option<bool> {
    let class64 = *elf.get(4)? == 2;
    let le = *elf.get(5)? == 1;
    let rd = |at: usize, n: usize| -> Option<u64> {
        let b = elf.get(at..at + n)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if le { b[n - 1 - i] } else { b[i] };
            v = (v << 8) | byte as u64;
        }
        Some(v)
    };
    let (phoff, phentsize, phnum) = if class64 {
        (rd(0x20, 8)?, rd(0x36, 2)?, rd(0x38, 2)?)
    } else {
        (rd(0x1c, 4)?, rd(0x2a, 2)?, rd(0x2c, 2)?)
    };
    for i in 0..phnum {
        let at = usize::try_from(phoff + i * phentsize).ok()?;
        if rd(at, 4)? == 3 {
            return Some(true); // PT_INTERP
        }
    }
    Some(false)
}

/// The environment additions for the launched program: LD_PRELOAD with the interposer first
/// (any existing entries kept after it), the socket name and rec's pid, and the mean bytes
/// between samples of `--heap-sample`.
pub fn environment(lib: &Path, socket: &str, sample: Option<u64>) -> Vec<(OsString, OsString)> {
    let mut preload = OsString::from(lib.as_os_str());
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(" ");
        preload.push(old);
    }
    let mut env = vec![
        ("LD_PRELOAD".into(), preload),
        (crossprof_heap_wire::ENV_SOCKET.into(), socket.into()),
        (
            crossprof_heap_wire::ENV_REC_PID.into(),
            std::process::id().to_string().into(),
        ),
    ];
    if let Some(bytes) = sample {
        env.push((
            crossprof_heap_wire::ENV_SAMPLE.into(),
            bytes.to_string().into(),
        ));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_and_static_elves_are_told_apart() {
        // rec's own test binary is dynamically linked on the host toolchain (gnu) and static
        // on musl; either way it must parse.
        let own = std::fs::read("/proc/self/exe").unwrap();
        assert!(has_interp(&own).is_some());
        assert_eq!(has_interp(b"\x7fELF"), None);
        assert!(!is_static_elf(Path::new("/no/such/file")));
        assert!(!is_static_elf(Path::new("/bin/sh")) || !Path::new("/bin/sh").exists());
    }

    #[test]
    fn an_interposer_is_for_another_machine_only_when_its_elf_says_so() {
        assert!(!for_another_machine(Path::new("/proc/self/exe")));
        assert!(!for_another_machine(Path::new("/no/such/file")));
        let dir = std::env::temp_dir().join(format!("crossprof-machine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut elf = std::fs::read("/proc/self/exe").unwrap();
        elf.truncate(64);
        elf[18..20].copy_from_slice(&243u16.to_le_bytes()); // EM_RISCV
        let lib = dir.join("lib.so");
        std::fs::write(&lib, &elf).unwrap();
        assert!(for_another_machine(&lib));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn existing_preloads_are_kept() {
        let env = environment(Path::new("/x/libcrossprof_heap.so"), "sock", None);
        assert!(env[0]
            .1
            .to_string_lossy()
            .starts_with("/x/libcrossprof_heap.so"));
        assert_eq!(env[1].1, "sock");
    }
}
