//! Our heap report against heaptrack's, exactly, with every known difference between the two
//! runs accounted for by a rule that says why, never by a tolerance:
//!
//! - heaptrack's extra sites (its own libstdc++ pool, see [`crate::heaptrack`]) are taken out
//!   of its totals;
//! - blocks the dynamic loader sizes by the number of loaded modules (threads' TLS vectors),
//!   which include each profiler's own libraries, are left out of leaked and peak bytes on
//!   both sides;
//! - heaptrack_print's *info 0* rule: after each free it resets its "last allocation" marker to
//!   0, which is also the index of the run's first (size, stack) pair, so a block of that pair
//!   freed right after another free counts as temporary. hostside counts the same way, but the
//!   first pair differs when heaptrack's run starts with its extra pool: heaptrack then credits
//!   that false temporary to its pool, hostside to the program's first allocation. So the
//!   temporaries heaptrack credits to its extra sites may reappear, all at one of our sites;
//! - sites heaptrack symbolizes differently from hostside and GNU addr2line: libbacktrace drops
//!   the innermost inlined frames of some functions (then heaptrack's site is our site with
//!   the same file and line whose inline chain holds heaptrack's function; sites so tied
//!   together are compared as one group, by sums), or finds no line at all for some code
//!   (then heaptrack names the site by its symbol only, and the allocations it counts there
//!   must be exactly what our sites hold beyond their counterparts).

use serde_json::Value;

use crate::heaptrack::{basename, ht_bytes, same_module, Extra, Heaptrack, HtSite};

/// What to compare besides allocations, leaked bytes and leaked blocks (always compared).
#[derive(Debug, Clone, Copy)]
pub struct Strictness {
    /// Temporary allocations, in total and per site. Off when threads race: which free follows
    /// which allocation then differs between two runs.
    pub temporary: bool,
    /// The exact peak, and each site's bytes at the peak. Off when the peak's moment depends on
    /// how threads interleave.
    pub peak: bool,
}

/// The most sites a group of differently symbolized sites may hold before the comparison
/// says so instead of comparing sums that mean little.
const MAX_GROUP: usize = 12;

/// The dynamic loader's per-thread TLS vectors (`allocate_dtv`) are sized by the number of
/// loaded modules, which includes the profiler's own preloaded libraries: their number matches
/// heaptrack's, their size cannot.
pub fn sized_by_the_profiler(module: &str) -> bool {
    basename(module).starts_with("ld-linux")
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// The offset in `module+0xOFFSET`, the name hostside gives a frame without a symbol.
fn unsymbolized_offset(function: &str) -> Option<u64> {
    let (_, hex) = function.rsplit_once("+0x")?;
    u64::from_str_radix(hex, 16).ok()
}

/// The module offsets of the allocator calls an unsymbolized site of ours groups: its
/// `call_offsets`, or the offset in its name `module+0xOFFSET` when it lists none.
fn call_offsets(site: &Value) -> Vec<u64> {
    match site["call_offsets"].as_array() {
        Some(offsets) => offsets.iter().filter_map(Value::as_u64).collect(),
        None => site["function"]
            .as_str()
            .and_then(unsymbolized_offset)
            .into_iter()
            .collect(),
    }
}

/// The index of our site (in `report --json`'s heap section) matching a heaptrack site: same
/// function, file name, line and module. A site heaptrack could not symbolize (no symbol in a
/// stripped library) is named by its absolute address in heaptrack's run; ours is named by the
/// start of the function the unwind tables place it in, and lists the module offsets of the
/// calls it groups. They match when the module is the same and the address and one of those
/// offsets agree within the page (modules are mapped page-aligned), if exactly one of our
/// sites does. Several of heaptrack's sites (calls in one function) may match one of ours.
pub fn our_site(sites: &[Value], s: &HtSite) -> Option<usize> {
    if let (Some(hex), None) = (s.function.strip_prefix("0x"), &s.file) {
        let addr = u64::from_str_radix(hex, 16).ok()?;
        let mut same = sites.iter().enumerate().filter(|(_, o)| {
            same_module(o["module"].as_str().unwrap_or(""), &s.module)
                && call_offsets(o)
                    .iter()
                    .any(|off| off & 0xfff == addr & 0xfff)
        });
        let first = same.next();
        return first.filter(|_| same.next().is_none()).map(|(i, _)| i);
    }
    sites.iter().position(|o| {
        o["function"].as_str() == Some(s.function.as_str())
            && o["file"].as_str().map(basename) == s.file.as_deref().map(basename)
            && o["line"].as_u64().map(|l| l as u32) == s.line.filter(|&l| l != 0)
            && same_module(o["module"].as_str().unwrap_or(""), &s.module)
    })
}

/// A function name without template arguments: `a<b<c>>::f<d>()` is `a::f()`.
fn without_templates(function: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in function.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// How many frames of our site's inline chain heaptrack may leave out: libbacktrace drops the
/// innermost inlined frames of some functions (`std::allocator` wrappers) and names the site
/// by the function that inlined them, keeping the innermost frame's file and line.
const DROPPED_INLINES: usize = 3;

/// Our sites that heaptrack's site names differently: the same file, line and module, and
/// heaptrack's function (template arguments left out, as libbacktrace may name a different
/// instantiation of the same code) among the site's innermost frames.
fn similar_sites(sites: &[Value], s: &HtSite) -> Vec<usize> {
    let Some(file) = &s.file else {
        return Vec::new();
    };
    let name = without_templates(&s.function);
    (0..sites.len())
        .filter(|&i| {
            let o = &sites[i];
            let named = o["frames"].as_array().is_some_and(|fs| {
                fs.iter().take(DROPPED_INLINES + 1).any(|f| {
                    f["function"].as_str().map(without_templates).as_deref() == Some(&name)
                })
            });
            named
                && o["file"].as_str().map(basename) == Some(basename(file))
                && o["line"].as_u64().map(|l| l as u32) == s.line
                && same_module(o["module"].as_str().unwrap_or(""), &s.module)
        })
        .collect()
}

/// A group of heaptrack sites and our sites compared with each other: one pair named alike, or
/// the sites tied together by a differently symbolized heaptrack site.
#[derive(Debug, Default)]
struct Group {
    theirs: Vec<usize>,
    ours: Vec<usize>,
}

/// Pairs heaptrack's sites with ours and groups the sites named differently (see the module
/// documentation). Also returns heaptrack's sites that have no counterpart at all (libbacktrace
/// found no line for them): their counts went to some of our sites, which cannot be told.
fn groups(sites: &[Value], own: &[HtSite]) -> (Vec<Group>, Vec<usize>, Vec<String>) {
    let mut problems = Vec::new();
    // Union-find over heaptrack's sites (0..n) and ours (n..n+m).
    let n = own.len();
    let mut parent: Vec<usize> = (0..n + sites.len()).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut linked = vec![false; n + sites.len()];
    let mut unplaced = Vec::new();
    for (h, s) in own.iter().enumerate() {
        let targets = match our_site(sites, s) {
            Some(o) => vec![o],
            None => similar_sites(sites, s),
        };
        if targets.is_empty() {
            unplaced.push(h);
        }
        for o in targets {
            let (ra, rb) = (find(&mut parent, h), find(&mut parent, n + o));
            parent[ra] = rb;
            linked[h] = true;
            linked[n + o] = true;
        }
    }
    for (o, site) in sites.iter().enumerate() {
        if !linked[n + o] && u(site, "allocations") > 0 {
            problems.push(format!(
                "our site {} {:?}:{:?} ({} allocations): not in heaptrack's list",
                site["function"], site["file"], site["line"], site["allocations"]
            ));
        }
    }
    let mut by_root: std::collections::BTreeMap<usize, Group> = Default::default();
    for (i, _) in linked.iter().enumerate().filter(|(_, &l)| l) {
        let g = by_root.entry(find(&mut parent, i)).or_default();
        if i < n {
            g.theirs.push(i);
        } else {
            g.ours.push(i - n);
        }
    }
    let groups: Vec<Group> = by_root.into_values().collect();
    for g in &groups {
        if g.theirs.len() + g.ours.len() > MAX_GROUP {
            problems.push(format!(
                "{} differently named sites tied together (heaptrack's {:?}): too coarse to compare",
                g.theirs.len() + g.ours.len(),
                g.theirs.iter().map(|&h| &own[h].function).collect::<Vec<_>>()
            ));
        }
    }
    (groups, unplaced, problems)
}

/// Every difference between our heap section (`report --json --top <all>`) and heaptrack's
/// numbers for the program's own sites. Empty when they agree.
pub fn differences(
    heap: &Value,
    ht: &Heaptrack,
    own: &[HtSite],
    extra: &Extra,
    strict: Strictness,
) -> Vec<String> {
    let sites = heap["sites"].as_array().cloned().unwrap_or_default();
    let (groups, unplaced, problems) = groups(&sites, own);
    let mut diffs: Vec<String> = problems;
    let mut check = |what: String, ours: String, theirs: String| {
        if ours != theirs {
            diffs.push(format!("{what}: ours {ours}, heaptrack {theirs}"));
        }
    };
    check(
        "allocations".into(),
        u(heap, "allocations").to_string(),
        (ht.allocations - extra.allocations).to_string(),
    );
    let loader = |f: &str| -> u64 {
        sites
            .iter()
            .filter(|s| sized_by_the_profiler(s["module"].as_str().unwrap_or("")))
            .map(|s| u(s, f))
            .sum()
    };
    let their_loader = |flame: &[(String, u64)]| -> u64 {
        flame
            .iter()
            .filter(|(stack, _)| stack.contains("(dl-tls.c)"))
            .map(|(_, v)| v)
            .sum()
    };
    if strict.peak {
        check(
            "peak bytes outside the loader".into(),
            (u(heap, "peak_bytes") - loader("at_peak_bytes")).to_string(),
            (ht.peak_bytes - extra.peak_bytes - their_loader(&ht.peak_flame)).to_string(),
        );
    }
    let their_loader_leak = their_loader(&ht.leaked_flame);
    check(
        "leaked bytes outside the loader".into(),
        (u(heap, "leaked_bytes") - loader("leaked_bytes")).to_string(),
        (ht.leaked_bytes - their_loader_leak).to_string(),
    );
    if their_loader_leak == 0 {
        check(
            "printed leak".into(),
            ht_bytes(u(heap, "leaked_bytes")),
            ht.leaked.clone(),
        );
    }
    check(
        "leaked blocks".into(),
        (u(heap, "leaked_allocations") + u(heap, "suppressed_leaked_allocations")).to_string(),
        ht.leaked_allocations.to_string(),
    );

    // heaptrack's sites without any counterpart: their counts sit in some of our sites, in
    // excess of those sites' counterparts; the excesses must add up to exactly these counts.
    let budget = |f: fn(&HtSite) -> u64| unplaced.iter().map(|&h| f(&own[h])).sum::<u64>();
    let (mut excess_allocations, mut excess_temporary) = (0u64, 0u64);
    // Temporaries heaptrack credited to its extra pool through the info-0 rule, credited by us
    // to one site of the program (see the module documentation): 0 or all of them.
    let mut moved: Option<(u64, String)> = None;
    for g in &groups {
        let name = g
            .theirs
            .iter()
            .map(|&h| format!("{} {:?}:{:?}", own[h].function, own[h].file, own[h].line))
            .collect::<Vec<_>>()
            .join(" + ");
        let sum_ours = |f: &str| g.ours.iter().map(|&o| u(&sites[o], f)).sum::<u64>();
        let sum_theirs = |f: fn(&HtSite) -> u64| g.theirs.iter().map(|&h| f(&own[h])).sum::<u64>();
        let (o, t) = (sum_ours("allocations"), sum_theirs(|s| s.allocations));
        let mut exact = o == t;
        if o > t && o - t <= budget(|s| s.allocations) {
            excess_allocations += o - t;
        } else {
            check(format!("{name} allocations"), o.to_string(), t.to_string());
        }
        if strict.temporary {
            let (o, t) = (sum_ours("temporary"), sum_theirs(|s| s.temporary));
            exact &= o == t;
            if o == t + extra.temporary && extra.temporary > 0 && moved.is_none() {
                moved = Some((o - t, name.clone()));
            } else if o > t && o - t <= budget(|s| s.temporary) {
                excess_temporary += o - t;
            } else {
                check(format!("{name} temporary"), o.to_string(), t.to_string());
            }
        }
        // Bytes are printed rounded: compared for pairs that hold the same allocations, and
        // not for the loader's blocks.
        let ([h], [o], true) = (&g.theirs[..], &g.ours[..], exact) else {
            continue;
        };
        let (s, o) = (&own[*h], &sites[*o]);
        if sized_by_the_profiler(&s.module) {
            continue;
        }
        check(
            format!("{name} leaked"),
            ht_bytes(u(o, "leaked_bytes")),
            s.leaked.clone(),
        );
        if strict.peak {
            check(
                format!("{name} bytes at the peak"),
                ht_bytes(u(o, "at_peak_bytes")),
                s.peak.clone(),
            );
        }
    }
    let unplaced_names: Vec<&str> = unplaced.iter().map(|&h| own[h].function.as_str()).collect();
    check(
        format!("allocations of heaptrack's sites without line information {unplaced_names:?}"),
        excess_allocations.to_string(),
        budget(|s| s.allocations).to_string(),
    );
    if strict.temporary {
        check(
            format!("temporary allocations of heaptrack's sites without line information {unplaced_names:?}"),
            excess_temporary.to_string(),
            budget(|s| s.temporary).to_string(),
        );
    }
    if strict.temporary {
        let shift = moved.as_ref().map_or(0, |(m, _)| *m);
        check(
            format!(
                "temporary (heaptrack's info-0 temporary moved: {})",
                moved.as_ref().map_or("none", |(_, site)| site.as_str())
            ),
            u(heap, "temporary").to_string(),
            (ht.temporary - extra.temporary + shift).to_string(),
        );
    }
    diffs
}
