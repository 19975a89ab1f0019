//! Modules fetched from debuginfod servers (opt-in through `DEBUGINFOD_URLS`): only the
//! modules that samples or allocations actually hit, each at most once, when the sysroot, the
//! debug dirs and the build-id index have no usable file (or none with DWARF) for them.
//!
//! Fetching lazily, on the first lookup that needs a module, is what keeps a report of a
//! process that maps a hundred libraries from downloading a hundred debug files. A fetch that
//! fails (server down, slow, answering garbage or another build-id) leaves the module as the
//! local lookup found it and is reported in the diagnostics.

use std::sync::OnceLock;

use crossprof_symbols::{Artifact, Debuginfod, Located, MatchKind, Origin};

use crate::processes::ModuleKey;

/// What fetching one module gave.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// The downloaded files, when something usable arrived.
    pub located: Option<Located>,
    /// Why the fetch failed (both artifacts when the module was missing), if it did.
    pub error: Option<String>,
}

/// The debuginfod client and each module's fetch, done once.
pub struct Remote {
    client: Debuginfod,
    wanted: Vec<bool>,
    fetched: Vec<OnceLock<Fetched>>,
}

impl Remote {
    /// A client from elfutils' environment variables, or `None` when `DEBUGINFOD_URLS` is
    /// unset. `located` are the local lookups' results, one per module of `keys`.
    pub fn from_env(keys: &[ModuleKey], located: &[Located]) -> Option<Remote> {
        let client = Debuginfod::from_env()?;
        let wanted = keys
            .iter()
            .zip(located)
            .map(|(k, l)| {
                !k.build_id.is_empty()
                    && !k.path.starts_with('[')
                    && (l.is_unusable() || l.lacks_dwarf())
            })
            .collect();
        Some(Remote {
            client,
            wanted,
            fetched: keys.iter().map(|_| OnceLock::new()).collect(),
        })
    }

    /// True when module `idx` is fetched on first use rather than loaded from local files.
    pub fn wants(&self, idx: usize) -> bool {
        self.wanted.get(idx).copied().unwrap_or(false)
    }

    /// Module `idx`'s files from the servers, fetching them now if this is the first use.
    /// `local` is what the local lookup found (its image is kept when only DWARF was missing).
    pub fn get_or_fetch(&self, idx: usize, key: &ModuleKey, local: &Located) -> &Fetched {
        self.fetched[idx].get_or_init(|| self.fetch(key, local))
    }

    /// Module `idx`'s fetch, if it was done.
    pub fn fetched(&self, idx: usize) -> Option<&Fetched> {
        self.fetched.get(idx).and_then(OnceLock::get)
    }

    fn fetch(&self, key: &ModuleKey, local: &Located) -> Fetched {
        let id = &key.build_id;
        let debug = self.client.fetch(id, Artifact::DebugInfo);
        if !local.is_unusable() {
            // Found locally with symbol tables only: DWARF is all that is missing.
            return match debug {
                Ok(d) => Fetched {
                    located: Some(Located {
                        debug_file: Some(d),
                        origin: Origin::Debuginfod,
                        ..local.clone()
                    }),
                    error: None,
                },
                Err(e) => Fetched {
                    located: None,
                    error: Some(e.to_string()),
                },
            };
        }
        let image = self.client.fetch(id, Artifact::Executable);
        let error = match (&image, &debug) {
            (Err(a), Err(b)) => Some(format!("{a}; {b}")),
            (_, Err(b)) => Some(b.to_string()),
            _ => None,
        };
        let image = image.ok();
        let debug_file = debug.ok().or_else(|| image.clone());
        Fetched {
            located: debug_file.map(|d| Located {
                match_kind: MatchKind::BuildId,
                image,
                debug_file: Some(d),
                origin: Origin::Debuginfod,
                image_origin: Origin::Debuginfod,
            }),
            error,
        }
    }
}
