//! Any prefix of a recording is readable: every frame that was complete before the cut comes
//! back, nothing panics, and the discarded tail is counted exactly.

use crossprof_format::{Damage, End, FrameWriter, Header, Reader, Record, Sample, FORMAT_VERSION};

/// A recording of `frames` frames with `per_frame` samples each, and the byte offset at which
/// each frame ends.
fn recording(frames: u64, per_frame: u64) -> (Vec<u8>, Vec<usize>) {
    let header = Header {
        format_version: FORMAT_VERSION,
        arch: "x86_64".into(),
        pointer_size: 8,
        ..Default::default()
    };
    let mut w = FrameWriter::new(Vec::new(), &header).unwrap();
    let mut ends = Vec::new();
    for f in 0..frames {
        for i in 0..per_frame {
            let n = f * per_frame + i;
            w.push(&Record::Sample(Sample {
                time: n,
                pid: 7,
                tid: 7,
                user_chain: vec![0x40_0000 + n * 13, 0x40_1234],
                ..Default::default()
            }))
            .unwrap();
        }
        w.flush().unwrap();
        ends.push(w.bytes_written() as usize);
    }
    let out = w
        .finish(End {
            samples: frames * per_frame,
            ..Default::default()
        })
        .unwrap();
    (out, ends)
}

fn count_samples(data: &[u8]) -> Option<(u64, crossprof_format::Summary)> {
    let mut r = Reader::new(data).ok()?;
    let mut n = 0;
    while let Some(rec) = r.next_record() {
        if let Record::Sample(s) = rec {
            assert_eq!(s.time, n, "samples come back in order, none invented");
            n += 1;
        }
    }
    Some((n, r.summary().clone()))
}

#[test]
fn whole_file_is_complete() {
    let (data, _) = recording(5, 100);
    let (n, s) = count_samples(&data).unwrap();
    assert_eq!(n, 500);
    assert!(s.complete);
    assert_eq!(s.bytes_discarded, 0);
    assert_eq!(s.frames, 12); // header, 5 pairs of frames, end
}

#[test]
fn every_prefix_recovers_exactly_the_complete_frames() {
    let (data, ends) = recording(4, 50);
    // ends[i] is the offset after sample frame i; the header frame ends before ends[0].
    for cut in 0..data.len() {
        let prefix = &data[..cut];
        match count_samples(prefix) {
            None => assert!(
                cut < ends[0],
                "only a cut inside the header frame may be unreadable (cut {cut})"
            ),
            Some((n, s)) => {
                let whole_frames = ends.iter().filter(|&&e| e <= cut).count() as u64;
                assert_eq!(n, whole_frames * 50, "cut at {cut}");
                let last_end = ends
                    .iter()
                    .copied()
                    .filter(|&e| e <= cut)
                    .max()
                    .unwrap_or(0);
                if cut < data.len() {
                    assert!(!s.complete);
                    if cut > last_end && last_end > 0 && cut < *ends.last().unwrap() {
                        assert_eq!(s.bytes_discarded, (cut - last_end) as u64, "cut at {cut}");
                        assert_eq!(s.damage, Some(Damage::Torn), "cut at {cut}");
                    }
                }
            }
        }
    }
}

#[test]
fn bit_flips_never_panic_and_never_invent_records() {
    let (data, _) = recording(3, 40);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..3000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut d = data.clone();
        let bit = (rng % (d.len() as u64 * 8)) as usize;
        d[bit / 8] ^= 1 << (bit % 8);
        if let Some((n, _)) = count_samples(&d) {
            assert!(n <= 120);
        }
    }
}

#[test]
fn garbage_is_not_a_recording() {
    assert!(Reader::new(b"").is_err());
    assert!(Reader::new(b"hello world, this is not zstd at all").is_err());
    assert!(Reader::new(&[0x28, 0xb5, 0x2f, 0xfd]).is_err());
}
