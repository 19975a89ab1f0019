//! Turning placed addresses into symbolized frames: each module is located in the sysroot once,
//! loaded lazily on first use, and each distinct address is resolved exactly once, in parallel
//! across cores, with a progress bar when there is much to do.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crossprof_symbols::{
    BuildIdIndex, FileCache, IndexOptions, Kallsyms, KernelSymbol, Located, Lookup, MatchKind,
    Module, Origin, SharedBytes,
};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use crate::frames::{Frame, FrameId, FrameTable};
use crate::processes::{ModuleKey, Placed, Processes};
use crate::remote::Remote;

/// A module's lookup result, for the report's `modules` section.
pub struct ModuleInfo {
    /// The module as recorded.
    pub key: ModuleKey,
    /// What the sysroot search found.
    pub located: Located,
    /// Why loading failed, if it did.
    pub load_error: Option<String>,
    /// Why its DWARF was present but unusable (names then come from symbol tables).
    pub dwarf_error: Option<String>,
    /// Whether its DWARF was turned off after the parser panicked during a lookup.
    pub dwarf_disabled: bool,
    /// Addresses whose DWARF lookup failed part way (named from the symbol tables instead,
    /// or with their inline chain cut short).
    pub dwarf_lookup_errors: u64,
    /// Compilation units of its debug file that did not parse and were skipped.
    pub dwarf_unreadable_units: u64,
    /// Other sources that were present but unusable (MiniDebugInfo, an unreadable image).
    pub warnings: Vec<String>,
    /// Why fetching it from debuginfod failed, if it was tried and failed.
    pub fetch_error: Option<String>,
    /// Distinct code addresses of the profile that fell in it. A module that is missing but
    /// holds none costs the report nothing (an `LD_PRELOAD`ed library that never ran, say).
    pub addresses: u64,
}

/// Resolves addresses of one recording.
pub struct Resolver {
    located: Vec<Located>,
    keys: Vec<ModuleKey>,
    loaded: Vec<OnceLock<Result<Module, String>>>,
    /// Distinct addresses resolved in each module.
    addresses: Vec<AtomicU64>,
    vdso: Option<Module>,
    /// Why the vDSO image copied from the board could not be parsed, if it could not.
    vdso_error: Option<String>,
    kallsyms: Option<Kallsyms>,
    /// Each module file mapped once, for the symbolizer and the unwinder both.
    files: FileCache,
    /// Modules fetched from debuginfod on first use (when `DEBUGINFOD_URLS` is set).
    remote: Option<Remote>,
}

/// Module path used for kernel frames.
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// Whether a frame's module is the kernel's: the kernel image or a loadable module (`[name]`),
/// not one of the user-space pseudo-modules (`[vdso]`, `[jit]`, `[unknown]`).
pub fn is_kernel_module(module: &str) -> bool {
    module == KERNEL_MODULE
        || (module.starts_with('[')
            && module.ends_with(']')
            && !matches!(module, "[vdso]" | "[unknown]" | crate::jit::JIT_MODULE))
}

impl Resolver {
    /// Locates every module of the recording (cheap: no DWARF is parsed yet).
    pub fn new(processes: &Processes, lookup: &Lookup) -> Resolver {
        let located = processes
            .modules
            .iter()
            .map(|m| {
                if m.path == "[vdso]" {
                    Located {
                        match_kind: if processes.vdso.is_some() {
                            MatchKind::BuildId
                        } else {
                            MatchKind::Missing
                        },
                        image: None,
                        debug_file: None,
                        origin: Origin::Path,
                        image_origin: Origin::Path,
                    }
                } else {
                    lookup.locate(&m.path, &m.build_id)
                }
            })
            .collect::<Vec<_>>();
        let located = find_elsewhere(processes, lookup, located);
        let loaded = processes.modules.iter().map(|_| OnceLock::new()).collect();
        let addresses = processes
            .modules
            .iter()
            .map(|_| AtomicU64::new(0))
            .collect();
        let (vdso, vdso_error) = match processes
            .vdso
            .as_ref()
            .map(|b| Module::from_bytes(b.data.clone()))
        {
            Some(Ok(m)) => (Some(m), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        let kallsyms = processes.kallsyms.as_deref().map(|text| {
            let mut k = Kallsyms::parse(text);
            k.add_modules(processes.kernel_modules.as_deref().unwrap_or_default());
            k
        });
        let remote = Remote::from_env(&processes.modules, &located);
        Resolver {
            located,
            keys: processes.modules.clone(),
            loaded,
            addresses,
            vdso,
            vdso_error,
            kallsyms,
            files: FileCache::new(),
            remote,
        }
    }

    /// The bytes of a module file, through the same map the symbolizer uses (the unwinder
    /// reads its sections from here rather than reading the file again), or why the file
    /// cannot be mapped (the message names it).
    pub fn map_file(&self, path: &Path) -> Result<SharedBytes, String> {
        self.files.map(path).map_err(|e| e.to_string())
    }

    /// Where module `idx` was found, if it exists. For a module to be fetched from
    /// debuginfod, the first call fetches it (blocking): ask only for modules in use.
    pub fn located(&self, idx: usize) -> Option<&Located> {
        let local = self.located.get(idx)?;
        match &self.remote {
            Some(r) if r.wants(idx) => {
                let fetched = r.get_or_fetch(idx, &self.keys[idx], local);
                Some(fetched.located.as_ref().unwrap_or(local))
            }
            _ => Some(local),
        }
    }

    /// Where module `idx` was found, without fetching anything.
    fn located_now(&self, idx: usize) -> &Located {
        let fetched = self.remote.as_ref().and_then(|r| r.fetched(idx));
        fetched
            .and_then(|f| f.located.as_ref())
            .unwrap_or(&self.located[idx])
    }

    /// Every module with its lookup outcome.
    pub fn modules(&self) -> Vec<ModuleInfo> {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let loaded = if key.path == "[vdso]" {
                    self.vdso.as_ref()
                } else {
                    self.loaded[i].get().and_then(|r| r.as_ref().ok())
                };
                ModuleInfo {
                    key: key.clone(),
                    located: self.located_now(i).clone(),
                    load_error: self.loaded[i].get().and_then(|r| r.as_ref().err().cloned()),
                    dwarf_error: loaded.and_then(|m| m.dwarf_error().map(str::to_string)),
                    dwarf_disabled: loaded.is_some_and(|m| m.dwarf_disabled()),
                    dwarf_lookup_errors: loaded.map_or(0, |m| m.dwarf_lookup_errors()),
                    dwarf_unreadable_units: loaded.map_or(0, |m| m.dwarf_unreadable_units()),
                    warnings: loaded.map_or_else(Vec::new, |m| {
                        m.warnings()
                            .iter()
                            // The DWARF warning is reported through `dwarf_error`.
                            .filter(|w| !m.dwarf_error().is_some_and(|d| w.starts_with(d)))
                            .cloned()
                            .collect()
                    }),
                    fetch_error: self
                        .remote
                        .as_ref()
                        .and_then(|r| r.fetched(i))
                        .and_then(|f| f.error.clone()),
                    addresses: self.addresses[i].load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Why the vDSO copied from the board did not parse as ELF (its frames are then
    /// addresses), if it did not.
    pub fn vdso_error(&self) -> Option<&str> {
        self.vdso_error.as_deref()
    }

    /// Loads every module's symbols now, in parallel. Called on a helper thread while the
    /// samples are read and unwound, so that parsing debug info (the costliest part of a
    /// report: decompressing and indexing DWARF) overlaps with that pass instead of following
    /// it. Lookups that need a module still loading simply wait for it.
    pub fn preload(&self) {
        (0..self.keys.len()).into_par_iter().for_each(|i| {
            // A module to be fetched from debuginfod waits for its first real use.
            if !self.remote.as_ref().is_some_and(|r| r.wants(i)) {
                self.module(i);
            }
        });
    }

    fn module(&self, idx: usize) -> Option<&Module> {
        if self.keys[idx].path == "[vdso]" {
            return self.vdso.as_ref();
        }
        let located = self.located(idx)?;
        if located.debug_file.is_none()
            || matches!(located.match_kind, MatchKind::Mismatch | MatchKind::Missing)
        {
            return None;
        }
        self.loaded[idx]
            .get_or_init(|| Module::load_with(located, &self.files).map_err(|e| e.to_string()))
            .as_ref()
            .ok()
    }

    /// Symbolizes each placed address once. `addrs` are lookup addresses (return addresses
    /// already moved back by one). The result maps each to its frames, innermost first.
    pub fn resolve(
        &self,
        addrs: Vec<Placed>,
        table: &mut FrameTable,
    ) -> HashMap<Placed, Vec<FrameId>> {
        let bar = if addrs.len() > 20_000 {
            let bar = ProgressBar::new(addrs.len() as u64);
            if let Ok(style) =
                ProgressStyle::with_template("resolving {bar:40} {pos}/{len} addresses ({eta})")
            {
                bar.set_style(style);
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        let resolved: Vec<(Placed, Vec<Frame>)> = addrs
            .into_par_iter()
            .map(|p| {
                let frames = self.frames_at(p);
                bar.inc(1);
                (p, frames)
            })
            .collect();
        bar.finish_and_clear();
        resolved
            .into_iter()
            .map(|(p, frames)| (p, frames.into_iter().map(|f| table.intern(f)).collect()))
            .collect()
    }

    fn frames_at(&self, p: Placed) -> Vec<Frame> {
        let key = &self.keys[p.module];
        self.addresses[p.module].fetch_add(1, Ordering::Relaxed);
        let module = self.module(p.module);
        let svma = module.and_then(|m| {
            if key.path == "[vdso]" {
                Some(m.offset_to_svma(p.file_offset).unwrap_or(p.file_offset))
            } else {
                m.offset_to_svma(p.file_offset)
            }
        });
        let found = module.zip(svma).and_then(|(m, svma)| {
            let frames = m.frames(svma);
            (!frames.is_empty() && frames.iter().any(|f| f.function.is_some())).then_some(frames)
        });
        match found {
            Some(frames) => frames
                .into_iter()
                .map(|f| Frame {
                    function: f
                        .function
                        .unwrap_or_else(|| unknown_name(&key.path, p.file_offset)),
                    file: f.file,
                    line: f.line,
                    module: key.path.clone(),
                    symbolized: true,
                })
                .collect(),
            // No symbol: named by the start of the function the unwind tables place it in,
            // so that one function's addresses are one row; else by the address itself.
            None => vec![Frame {
                function: unknown_name(
                    &key.path,
                    module
                        .zip(svma)
                        .and_then(|(m, svma)| m.function_start_offset(svma))
                        .unwrap_or(p.file_offset),
                ),
                file: None,
                line: None,
                module: key.path.clone(),
                symbolized: false,
            }],
        }
    }

    /// A kernel address (already moved back by one for return addresses).
    pub fn kernel_frame(&self, addr: u64) -> Frame {
        let sym = self.kallsyms.as_ref().map(|k| k.symbolize(addr));
        // A loadable module's frames are in module `[name]`, as perf shows them.
        let module = sym
            .and_then(|s| s.module)
            .map_or_else(|| KERNEL_MODULE.to_string(), |m| format!("[{m}]"));
        match sym {
            Some(KernelSymbol {
                function: Some(name),
                ..
            }) => Frame {
                function: name.to_string(),
                file: None,
                line: None,
                module,
                symbolized: true,
            },
            Some(KernelSymbol {
                module: Some(_),
                module_start,
                ..
            }) => Frame {
                function: format!("{module}+{:#x}", addr.wrapping_sub(module_start)),
                file: None,
                line: None,
                module,
                symbolized: false,
            },
            _ => Frame {
                function: format!("[kernel] {addr:#x}"),
                file: None,
                line: None,
                module: KERNEL_MODULE.into(),
                symbolized: false,
            },
        }
    }
}

/// Modules not found at their paths, found without DWARF, or found without their image (the
/// debug file by the `.build-id` layout, the binary at another path), looked up by build-id in
/// the index of the sysroot, the debug dirs and the search dirs. The index is built only when
/// some module needs it.
fn find_elsewhere(
    processes: &Processes,
    lookup: &Lookup,
    mut located: Vec<Located>,
) -> Vec<Located> {
    if lookup.index_roots().is_empty() {
        return located;
    }
    let need: Vec<usize> = (0..located.len())
        .filter(|&i| {
            let m = &processes.modules[i];
            !m.build_id.is_empty()
                && m.path != "[vdso]"
                && (located[i].is_unusable()
                    || located[i].image.is_none()
                    || located[i].lacks_dwarf())
        })
        .collect();
    if need.is_empty() {
        return located;
    }
    let index = BuildIdIndex::build(&lookup.index_roots(), &IndexOptions::for_user());
    for i in need {
        let m = &processes.modules[i];
        let l = &mut located[i];
        if l.is_unusable() {
            if let Some(found) = lookup.locate_by_index(&index, &m.path, &m.build_id) {
                *l = found;
            }
            continue;
        }
        if l.image.is_none() {
            if let Some(image) = lookup.image_by_index(&index, &m.build_id) {
                l.image = Some(image);
                l.image_origin = Origin::Index;
            }
        }
        if l.lacks_dwarf() {
            if let Some(dwarf) = lookup.dwarf_by_index(&index, &m.build_id) {
                l.debug_file = Some(dwarf);
                l.origin = Origin::Index;
            }
        }
    }
    located
}

/// The name shown for code no symbol covers: `libfoo.so+0x1234`, the file offset of its
/// function's start when the unwind tables place it in one, else of the address itself.
fn unknown_name(path: &str, offset: u64) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    format!("{base}+{offset:#x}")
}

/// A frame for an address outside every known mapping.
pub fn unmapped_frame(addr: u64) -> Frame {
    Frame {
        function: format!("{addr:#x}"),
        file: None,
        line: None,
        module: "[unknown]".into(),
        symbolized: false,
    }
}
