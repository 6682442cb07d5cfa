//! config.json: bytes -> the parse and checks `cordon create` runs on a
//! bundle's config.json (`validate::config`, which `validate::bundle` calls
//! once it has read the file), against a bundle directory with a `rootfs`.
//!
//! Oracle: no panic, and an error is one line that names config.json (the
//! engines show the runtime's last log line).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cordon::container::validate;
use libfuzzer_sys::fuzz_target;

/// A bundle directory with an empty `rootfs/`, made once per process.
fn bundle() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join("cordon-fuzz-bundle");
        std::fs::create_dir_all(d.join("rootfs")).expect("make the fuzz bundle");
        std::fs::canonicalize(&d).expect("canonical bundle path")
    })
}

fuzz_target!(|data: &[u8]| {
    // config.json is read with read_to_string: not UTF-8 is an I/O error.
    let Ok(text) = std::str::from_utf8(data) else { return };
    match validate::config(text, bundle()) {
        Ok(spec) => {
            // What create goes on to use must be there.
            assert!(spec.root().is_some() && spec.process().is_some() && spec.linux().is_some());
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("config.json"), "{msg}");
            assert!(
                !msg.contains('\n') && !msg.contains('\r'),
                "error is not one line: {msg:?}"
            );
        }
    }
});
