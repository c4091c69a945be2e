//! Which GPUs of the host to use: `--gpus all|0,1,..` ([`GpuSelection`]), and opening one
//! [`GpuEngine`] per selected device.

use std::fmt;
use std::str::FromStr;

use super::{driver_present, GpuEngine, GpuOptions};

/// The GPUs a command uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelection {
    /// Every device the driver reports.
    All,
    /// These ordinals, in this order (no duplicates).
    List(Vec<usize>),
}

impl Default for GpuSelection {
    /// GPU 0 only: the behaviour of a single-GPU build, so that a command on a shared
    /// multi-GPU host takes one device unless told otherwise.
    fn default() -> Self {
        GpuSelection::List(vec![0])
    }
}

/// Errors of [`GpuSelection`]: a bad `--gpus` text or an absent device.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DevicesError {
    /// The text is not `all` or a comma-separated list of distinct ordinals.
    #[error("--gpus `{text}`: {reason} (expected `all` or a list like `0,1`)")]
    BadList {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A listed ordinal that the driver does not report.
    #[error("no CUDA device {ordinal} ({found} found)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices found.
        found: usize,
    },
    /// No GPU is usable at all (no driver, no NVRTC, no device, or opening one failed).
    #[error("{0}")]
    Unavailable(String),
}

impl FromStr for GpuSelection {
    type Err = DevicesError;

    fn from_str(text: &str) -> Result<Self, DevicesError> {
        let bad = |reason: &str| DevicesError::BadList {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        if t.eq_ignore_ascii_case("all") {
            return Ok(GpuSelection::All);
        }
        if t.is_empty() {
            return Err(bad("empty"));
        }
        let mut list = Vec::new();
        for part in t.split(',') {
            let part = part.trim();
            let k: usize = part
                .parse()
                .map_err(|_| bad(&format!("`{part}` is not a device ordinal")))?;
            if list.contains(&k) {
                return Err(bad(&format!("device {k} listed twice")));
            }
            list.push(k);
        }
        Ok(GpuSelection::List(list))
    }
}

impl fmt::Display for GpuSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuSelection::All => f.write_str("all"),
            GpuSelection::List(l) => {
                let s: Vec<String> = l.iter().map(|k| k.to_string()).collect();
                f.write_str(&s.join(","))
            }
        }
    }
}

/// Number of CUDA devices the driver reports; an error saying why when there is no
/// driver. Never panics.
pub fn device_count() -> Result<usize, DevicesError> {
    check_driver()?;
    std::panic::catch_unwind(cudarc::driver::CudaContext::device_count)
        .map_err(|_| DevicesError::Unavailable("the CUDA driver panicked".into()))?
        .map(|n| n.max(0) as usize)
        .map_err(|e| DevicesError::Unavailable(format!("{e:?}")))
}

/// Whether the NVIDIA driver library loads, without initialising the driver (`cuInit`
/// costs about 0.1 s in a new process): the check of a command line that asks for a GPU
/// before any query needs one.
pub fn check_driver() -> Result<(), DevicesError> {
    if !driver_present() {
        return Err(DevicesError::Unavailable(
            "libcuda not found (no NVIDIA driver)".into(),
        ));
    }
    Ok(())
}

impl GpuSelection {
    /// The ordinals this selection means on a host with `found` devices: `All` is
    /// `0..found` (an error when `found` is 0), a list must name existing devices.
    pub(crate) fn ordinals_of(&self, found: usize) -> Result<Vec<usize>, DevicesError> {
        match self {
            GpuSelection::All if found == 0 => {
                Err(DevicesError::Unavailable("no CUDA device found".into()))
            }
            GpuSelection::All => Ok((0..found).collect()),
            GpuSelection::List(l) => {
                if let Some(&ordinal) = l.iter().find(|&&k| k >= found) {
                    return Err(DevicesError::NoDevice { ordinal, found });
                }
                Ok(l.clone())
            }
        }
    }

    /// The ordinals on this host.
    pub fn ordinals(&self) -> Result<Vec<usize>, DevicesError> {
        self.ordinals_of(device_count()?)
    }

    /// One engine per selected device, in selection order, each with `options`.
    pub fn open_with(&self, options: GpuOptions) -> Result<Vec<GpuEngine>, DevicesError> {
        self.ordinals()?
            .into_iter()
            .map(|k| {
                GpuEngine::with_options(k, options)
                    .map_err(|e| DevicesError::Unavailable(e.to_string()))
            })
            .collect()
    }
}

/// The engines of `selection` for an `auto` engine choice, where the GPU is optional:
/// `None` after a warning through the [`log`] facade when `selection` is `None` (the
/// default, GPU 0) or `all` and no GPU is usable (callers then use the CPU engine; the
/// `k2rpq` binary prints the warning on stderr unless `--quiet`). An explicit list must be
/// honoured: an absent or unusable device in it is an error. Each engine gets `options`.
pub fn open_or_notice_with(
    selection: Option<&GpuSelection>,
    options: GpuOptions,
) -> Result<Option<Vec<GpuEngine>>, DevicesError> {
    match selection {
        Some(s @ GpuSelection::List(_)) => s.open_with(options).map(Some),
        other => match other.cloned().unwrap_or_default().open_with(options) {
            Ok(e) => Ok(Some(e)),
            Err(e) => {
                log::warn!("{e}; using the CPU engine");
                Ok(None)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_and_lists() {
        assert_eq!("all".parse::<GpuSelection>(), Ok(GpuSelection::All));
        assert_eq!("ALL".parse::<GpuSelection>(), Ok(GpuSelection::All));
        assert_eq!(
            " 1, 0 ".parse::<GpuSelection>(),
            Ok(GpuSelection::List(vec![1, 0]))
        );
        assert_eq!(GpuSelection::default(), GpuSelection::List(vec![0]));
        assert_eq!(GpuSelection::List(vec![2, 3]).to_string(), "2,3");
        for bad in ["", "0,,1", "x", "0,0", "-1", "1.5"] {
            let e = bad.parse::<GpuSelection>().unwrap_err();
            assert!(matches!(e, DevicesError::BadList { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("--gpus"), "{e}");
        }
    }

    #[test]
    fn ordinals_check_the_device_count() {
        assert_eq!(GpuSelection::All.ordinals_of(3), Ok(vec![0, 1, 2]));
        assert!(matches!(
            GpuSelection::All.ordinals_of(0),
            Err(DevicesError::Unavailable(_))
        ));
        assert_eq!(GpuSelection::List(vec![1]).ordinals_of(2), Ok(vec![1]));
        assert_eq!(
            GpuSelection::List(vec![0, 2]).ordinals_of(2),
            Err(DevicesError::NoDevice {
                ordinal: 2,
                found: 2
            })
        );
        assert_eq!(
            GpuSelection::List(vec![0]).ordinals_of(0),
            Err(DevicesError::NoDevice {
                ordinal: 0,
                found: 0
            })
        );
    }
}
