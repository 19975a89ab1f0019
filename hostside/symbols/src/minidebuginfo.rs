//! MiniDebugInfo: the `.gnu_debugdata` section some distributions and Yocto
//! (`PACKAGE_MINIDEBUGINFO`) embed in stripped binaries, an xz-compressed ELF file that holds the
//! `.symtab` of the functions `.dynsym` lacks.
//!
//! The section is untrusted: decompression streams with a dictionary-memory limit and stops at a
//! fixed output size, so a small section cannot make hostside allocate without bound.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use object::{Object, ObjectSection};

use crate::backing::Backing;
use crate::error::Error;

/// The largest decompressed MiniDebugInfo accepted (real ones are a few hundred KiB).
pub(crate) const MAX_DECOMPRESSED: u64 = 64 << 20;
/// The xz decoder's dictionary memory limit, in KiB (`xz -9` needs 65 MiB).
const MEM_LIMIT_KB: u32 = 96 * 1024;
const SECTION: &str = ".gnu_debugdata";

/// Decompresses the file's `.gnu_debugdata`, if it has one. Allocates the decompressed ELF.
pub(crate) fn extract(file: &object::File<'_>, path: &Path) -> Result<Option<Arc<Backing>>, Error> {
    let Some(section) = file.section_by_name(SECTION) else {
        return Ok(None);
    };
    let data = section.data().map_err(|source| Error::Elf {
        path: path.to_path_buf(),
        source,
    })?;
    if data.is_empty() {
        return Ok(None);
    }
    decompress(data, path).map(|v| Some(Arc::new(Backing::Owned(v))))
}

fn decompress(data: &[u8], path: &Path) -> Result<Vec<u8>, Error> {
    let fail = |message: String| Error::Decompress {
        path: path.to_path_buf(),
        section: SECTION.into(),
        message,
    };
    // The decoder is a third-party parser fed hostile bytes; a panic in it must not take
    // hostside down with it.
    let result = std::panic::catch_unwind(|| {
        let reader = lzma_rust2::XzReader::new_mem_limit(data, false, MEM_LIMIT_KB);
        let mut out = Vec::new();
        reader
            .take(MAX_DECOMPRESSED + 1)
            .read_to_end(&mut out)
            .map(|_| out)
    });
    match result {
        Err(_) => Err(Error::ParserPanic {
            path: path.to_path_buf(),
            parser: "xz",
        }),
        Ok(Err(e)) => Err(fail(e.to_string())),
        Ok(Ok(out)) if out.len() as u64 > MAX_DECOMPRESSED => Err(Error::TooLarge {
            path: path.to_path_buf(),
            section: SECTION.into(),
            size: out.len() as u64,
            limit: MAX_DECOMPRESSED,
        }),
        Ok(Ok(out)) => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let p = Path::new("x");
        assert!(decompress(b"", p).is_err());
        assert!(decompress(b"\xfd7zXZ\0garbage", p).is_err());
        assert!(decompress(&[0xff; 4096], p).is_err());
    }
}
