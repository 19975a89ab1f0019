//! How the host will recognize each mapped file: its GNU build-id (read from the file when the
//! kernel did not put it in the MMAP2 record), its inode/size/mtime, and for ELF files without a
//! build-id a fingerprint of its first bytes. Results are cached per path, so a library mapped
//! by a thousand processes is read once.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;

use crossprof_format::Mmap;
use object::{Object, ObjectSection};

/// At most this many bytes are read to find a build-id note; notes sit near the start of every
/// linker's output, and a cap keeps a huge file from costing the board memory.
const NOTE_READ_LIMIT: u64 = 1 << 20;

#[derive(Clone, Default)]
struct Identity {
    build_id: Vec<u8>,
    inode: u64,
    size: u64,
    mtime: u64,
    fingerprint: u64,
}

/// At most this many paths are cached (a few hundred bytes each): a long `rec -a` on a board
/// that maps ever new files must not grow without bound. A full cache starts over.
const MAX_CACHED: usize = 4096;

/// Cache of file identities by path.
#[derive(Default)]
pub struct Identities {
    cache: HashMap<String, Identity>,
}

impl Identities {
    /// Completes an MMAP record in place. `root` is where the process's filesystem is seen from
    /// (`/proc/PID/root` while the process lives), so paths inside containers resolve.
    pub fn fill(&mut self, m: &mut Mmap, root: Option<&str>) {
        if m.path.is_empty() || m.path.starts_with('[') || m.path.starts_with("//") {
            return;
        }
        if self.cache.len() >= MAX_CACHED && !self.cache.contains_key(&m.path) {
            self.cache.clear();
        }
        let id = self
            .cache
            .entry(m.path.clone())
            .or_insert_with(|| identify(&m.path, root))
            .clone();
        if m.build_id.is_empty() {
            m.build_id = id.build_id;
            m.fingerprint = id.fingerprint;
        }
        if m.inode == 0 {
            m.inode = id.inode;
        }
        m.file_size = id.size;
        m.mtime = id.mtime;
    }
}

fn identify(path: &str, root: Option<&str>) -> Identity {
    let candidates = [root.map(|r| format!("{r}{path}")), Some(path.to_string())];
    for p in candidates.into_iter().flatten() {
        if let Ok(f) = File::open(&p) {
            return identify_file(f);
        }
    }
    Identity::default()
}

fn identify_file(f: File) -> Identity {
    let mut id = Identity::default();
    if let Ok(meta) = f.metadata() {
        id.inode = meta.ino();
        id.size = meta.len();
        id.mtime = meta.mtime().max(0) as u64;
    }
    let mut head = Vec::new();
    if f.take(NOTE_READ_LIMIT).read_to_end(&mut head).is_err() {
        return id;
    }
    if !head.starts_with(b"\x7fELF") {
        return id;
    }
    id.build_id = build_id(&head).unwrap_or_default();
    if id.build_id.is_empty() {
        id.fingerprint = fingerprint(&head[..head.len().min(4096)], id.size);
    }
    id
}

/// The GNU build-id of an ELF image (or its first bytes), if it has one.
pub fn build_id(elf: &[u8]) -> Option<Vec<u8>> {
    let file = object::File::parse(elf).ok()?;
    if let Ok(Some(id)) = file.build_id() {
        return Some(id.to_vec());
    }
    // Files cut at NOTE_READ_LIMIT may lack section headers (they sit at the end); look at the
    // note section by name as a second chance.
    let s = file.section_by_name(".note.gnu.build-id")?;
    let data = s.data().ok()?;
    data.get(16..).map(|d| d.to_vec())
}

/// FNV-1a over the first bytes and the size: enough to tell a rebuilt file from the recorded one.
fn fingerprint(head: &[u8], size: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in head.iter().chain(size.to_le_bytes().iter()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_has_a_build_id() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        // Test binaries are linked by the default toolchain, which adds a build-id.
        assert!(build_id(&exe).is_some_and(|id| id.len() >= 16));
    }

    #[test]
    fn garbage_is_not_an_elf() {
        assert_eq!(build_id(b"\x7fELF\x02\x01\x01garbage"), None);
        assert_eq!(build_id(&[]), None);
    }
}
