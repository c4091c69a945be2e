//! `.k2` files: round trips through mmap, and damaged files giving the right error.

mod common;

use common::{arb_matrix, big_matrix};
use k2rpq::k2tree::file::{self, FileError, OpenOptions, WriteOptions, FORMAT_VERSION};
use k2rpq::k2tree::{Directory, K2Tree};
use proptest::prelude::*;

const ALL_OPTIONS: [WriteOptions; 5] = [
    WriteOptions {
        directory: None,
        frontier: false,
    },
    WriteOptions {
        directory: Some(256),
        frontier: false,
    },
    WriteOptions {
        directory: None,
        frontier: true,
    },
    WriteOptions {
        directory: Some(16),
        frontier: true,
    },
    WriteOptions {
        directory: Some(100),
        frontier: true,
    },
];

fn round_trip(t: &K2Tree, opts: WriteOptions) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.k2");
    let h = file::write(t, &path, opts).unwrap();
    prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), h.file_len());
    prop_assert_eq!(file::read_header(&path).unwrap(), h.clone());
    let u = file::open(&path, OpenOptions::default()).unwrap();
    prop_assert_eq!(&u, t);
    prop_assert_eq!(u.cells(), t.cells());
    // (Validation may compute a default directory, so only a stored one is checked.)
    if let Some(s) = opts.directory {
        prop_assert_eq!(
            u.directory_if_built().map(|d| d.sample),
            Some(Directory::period(s))
        );
    }
    prop_assert_eq!(u.has_frontier(), opts.frontier);
    if let Some(s) = opts.directory {
        prop_assert_eq!(u.directory(), &Directory::build(t, s));
    }
    prop_assert_eq!(&u.frontier()[..], &t.frontier()[..]);
    prop_assert_eq!(u.stats().nodes, t.stats().nodes);
    for r in 0..t.rows().min(80) as u32 {
        prop_assert_eq!(u.row(r), t.row(r));
    }
    // No temporary files are left beside the output.
    prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn files_round_trip((rows, cols, edges) in arb_matrix()) {
        let t = K2Tree::from_edges(rows, cols, edges);
        for opts in ALL_OPTIONS {
            round_trip(&t, opts)?;
        }
    }
}

/// A written file with every section, and its tree.
fn sample_file() -> (tempfile::TempDir, std::path::PathBuf, K2Tree, Vec<u8>) {
    let edges = big_matrix(3000, 2500, 20_000, 3);
    let t = K2Tree::from_edges(3000, 2500, edges);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.k2");
    file::write(
        &t,
        &path,
        WriteOptions {
            directory: Some(64),
            frontier: true,
        },
    )
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (dir, path, t, bytes)
}

fn open_bytes(dir: &std::path::Path, bytes: &[u8], verify: bool) -> Result<K2Tree, FileError> {
    let p = dir.join("damaged.k2");
    std::fs::write(&p, bytes).unwrap();
    file::open(
        &p,
        OpenOptions {
            verify_checksums: verify,
        },
    )
}

#[test]
fn truncation_at_every_boundary_is_reported() {
    let (dir, path, _, bytes) = sample_file();
    let h = file::read_header(&path).unwrap();
    let mut cuts = vec![0, 1, 7, 8, 11, 12, 100, 119, 120, h.header_len() - 1];
    for s in &h.sections {
        cuts.extend([
            s.offset,
            s.offset + 1,
            s.offset + s.len - 1,
            s.offset + s.len,
        ]);
    }
    cuts.retain(|&c| c < bytes.len() as u64);
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        for verify in [true, false] {
            match open_bytes(dir.path(), &bytes[..cut as usize], verify) {
                Err(FileError::Truncated { needed, len, .. }) => {
                    assert_eq!(len, cut);
                    assert!(needed > cut, "cut {cut}: needed {needed}");
                }
                other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
            }
        }
        let p = dir.path().join("damaged.k2");
        assert!(matches!(
            file::read_header(&p),
            Err(FileError::Truncated { .. })
        ));
    }
}

#[test]
fn wrong_magic_version_and_trailing_bytes() {
    let (dir, _, _, bytes) = sample_file();
    let mut b = bytes.clone();
    b[0] ^= 0x20;
    assert!(matches!(
        open_bytes(dir.path(), &b, true),
        Err(FileError::BadMagic { .. })
    ));
    assert!(matches!(
        open_bytes(dir.path(), b"hello", true),
        Err(FileError::BadMagic { .. })
    ));
    let mut b = bytes.clone();
    b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    match open_bytes(dir.path(), &b, false) {
        Err(FileError::UnsupportedVersion {
            found, supported, ..
        }) => {
            assert_eq!((found, supported), (FORMAT_VERSION + 1, FORMAT_VERSION))
        }
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    let mut b = bytes.clone();
    b.extend_from_slice(&[0; 8]);
    assert!(matches!(
        open_bytes(dir.path(), &b, true),
        Err(FileError::Invalid { .. })
    ));
    // The error names the file.
    let e = open_bytes(dir.path(), &bytes[..50], true).unwrap_err();
    assert!(e.to_string().contains("damaged.k2"), "{e}");
    let e = file::open(dir.path().join("missing.k2"), OpenOptions::default()).unwrap_err();
    assert!(matches!(e, FileError::Io { .. }) && e.to_string().contains("missing.k2"));
}

#[test]
fn damaged_section_is_named_by_its_checksum() {
    let (dir, path, _, bytes) = sample_file();
    let h = file::read_header(&path).unwrap();
    for (s, name) in h
        .sections
        .iter()
        .zip(["signatures", "directory", "frontier"])
    {
        let mut b = bytes.clone();
        b[(s.offset + s.len / 2) as usize] ^= 0x10;
        match open_bytes(dir.path(), &b, true) {
            Err(FileError::Checksum { section, .. }) => assert_eq!(section, name),
            other => panic!("expected a {name} checksum error, got {other:?}"),
        }
        // Without checksums the structural checks still refuse it.
        assert!(
            matches!(
                open_bytes(dir.path(), &b, false),
                Err(FileError::Invalid { .. })
            ),
            "{name}"
        );
    }
    let mut b = bytes.clone();
    b[20] ^= 1; // rows
    assert!(matches!(
        open_bytes(dir.path(), &b, true),
        Err(FileError::Checksum {
            section: "header",
            ..
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any flipped bytes: with checksums an error, never a tree; without checksums an
    /// error or a structurally valid tree (several flipped bits can move cells and still
    /// form a valid tree: only the CRCs can tell); never a panic.
    #[test]
    fn flipped_bytes_never_panic_or_mislead(flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4)) {
        thread_local! {
            static SAMPLE: (tempfile::TempDir, std::path::PathBuf, K2Tree, Vec<u8>) = sample_file();
        }
        SAMPLE.with(|(dir, _, _, bytes)| {
            let mut b = bytes.clone();
            for (i, x) in &flips {
                let n = b.len();
                b[i.index(n)] ^= x;
            }
            let changed = b != *bytes;
            match open_bytes(dir.path(), &b, true) {
                Ok(u) => prop_assert!(!changed, "corrupted file opened: {:?}", u.stats()),
                Err(e) => prop_assert!(changed, "{e}"),
            }
            if let Ok(u) = open_bytes(dir.path(), &b, false) {
                prop_assert!(u.validate().is_ok());
                let cells = u.cells();
                prop_assert_eq!(cells.len() as u64, u.nnz());
                for &(r, c) in cells.iter().take(50) {
                    prop_assert!(u.contains(r, c) && u.row(r).contains(&c));
                }
            }
            Ok(())
        })?;
    }

    /// Arbitrary short files never panic.
    #[test]
    fn random_files_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..400), magic in any::<bool>()) {
        if magic && b.len() >= 12 {
            b[..8].copy_from_slice(&file::MAGIC);
            b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        }
        let dir = tempfile::tempdir().unwrap();
        for verify in [true, false] {
            let _ = open_bytes(dir.path(), &b, verify);
        }
    }
}

#[test]
fn write_replaces_atomically_and_reports_bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.k2");
    let a = K2Tree::from_edges(4, 4, vec![(0, 0)]);
    let b = K2Tree::from_edges(9, 9, vec![(8, 1), (2, 2)]);
    file::write(&a, &path, WriteOptions::default()).unwrap();
    let mapped = file::open(&path, OpenOptions::default()).unwrap();
    file::write(&b, &path, WriteOptions::default()).unwrap();
    // The old map stays valid after the rename; the new file has the new tree.
    assert_eq!(mapped.cells(), vec![(0, 0)]);
    assert_eq!(file::open(&path, OpenOptions::default()).unwrap(), b);
    let e = file::write(
        &a,
        dir.path().join("no/such/dir/x.k2"),
        WriteOptions::default(),
    );
    assert!(matches!(e, Err(FileError::Io { .. })));
}
