//! Optimizer files: the raw config maps ([`Optimizer`]) and a typed view
//! ([`OptimizerSettings`], [`Algorithm`]).

use crate::key::Key;

/// An Optimizer file: the `uint_configs` map (str → uint32) and the `float_configs`
/// map (str → float), in file order. A key repeated in one map keeps its first value,
/// as in primitiv.
///
/// ```
/// use tensorfmt_primitiv::{Algorithm, Optimizer, OptimizerSettings};
/// let s = OptimizerSettings { algorithm: Algorithm::Adam { alpha: 0.002, beta1: 0.8, beta2: 0.99, eps: 1e-6 },
///     epoch: 7, ..OptimizerSettings::default() };
/// let o = Optimizer::from_settings(&s);
/// assert_eq!(o.uint("Optimizer.epoch"), Some(7));
/// assert_eq!(o.float("Adam.beta1"), Some(0.8));
/// assert_eq!(o.settings(), s);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Optimizer {
    /// `uint_configs`, in file order.
    pub uint_configs: Vec<(Key, u32)>,
    /// `float_configs`, in file order.
    pub float_configs: Vec<(Key, f32)>,
}

/// One optimizer class of primitiv (the file does not say which; see
/// [`Optimizer::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptimizerKind {
    /// `SGD`.
    Sgd,
    /// `MomentumSGD`.
    MomentumSgd,
    /// `AdaGrad`.
    AdaGrad,
    /// `RMSProp`.
    RmsProp,
    /// `AdaDelta`.
    AdaDelta,
    /// `Adam`.
    Adam,
}

impl OptimizerKind {
    /// Every kind.
    pub const ALL: [OptimizerKind; 6] = [
        OptimizerKind::Sgd,
        OptimizerKind::MomentumSgd,
        OptimizerKind::AdaGrad,
        OptimizerKind::RmsProp,
        OptimizerKind::AdaDelta,
        OptimizerKind::Adam,
    ];

    /// primitiv's class name, also the key prefix (`Adam` for `Adam.alpha`).
    pub const fn name(self) -> &'static str {
        match self {
            OptimizerKind::Sgd => "SGD",
            OptimizerKind::MomentumSgd => "MomentumSGD",
            OptimizerKind::AdaGrad => "AdaGrad",
            OptimizerKind::RmsProp => "RMSProp",
            OptimizerKind::AdaDelta => "AdaDelta",
            OptimizerKind::Adam => "Adam",
        }
    }

    /// The float keys of the class with their defaults, in a fixed order.
    pub const fn float_keys(self) -> &'static [(&'static str, f32)] {
        match self {
            OptimizerKind::Sgd => &[("SGD.eta", 0.1)],
            OptimizerKind::MomentumSgd => {
                &[("MomentumSGD.eta", 0.01), ("MomentumSGD.momentum", 0.9)]
            }
            OptimizerKind::AdaGrad => &[("AdaGrad.eta", 0.001), ("AdaGrad.eps", 1e-8)],
            OptimizerKind::RmsProp => &[
                ("RMSProp.eta", 0.01),
                ("RMSProp.alpha", 0.9),
                ("RMSProp.eps", 1e-8),
            ],
            OptimizerKind::AdaDelta => &[("AdaDelta.rho", 0.95), ("AdaDelta.eps", 1e-6)],
            OptimizerKind::Adam => &[
                ("Adam.alpha", 0.001),
                ("Adam.beta1", 0.9),
                ("Adam.beta2", 0.999),
                ("Adam.eps", 1e-8),
            ],
        }
    }

    /// The kind whose class name is `prefix`.
    pub fn from_prefix(prefix: &[u8]) -> Option<OptimizerKind> {
        OptimizerKind::ALL
            .into_iter()
            .find(|k| k.name().as_bytes() == prefix)
    }
}

/// The hyper-parameters of one optimizer class (primitiv's defaults in
/// [`Algorithm::defaults`]).
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)] // field names are primitiv's config key suffixes
pub enum Algorithm {
    Sgd {
        eta: f32,
    },
    MomentumSgd {
        eta: f32,
        momentum: f32,
    },
    AdaGrad {
        eta: f32,
        eps: f32,
    },
    RmsProp {
        eta: f32,
        alpha: f32,
        eps: f32,
    },
    AdaDelta {
        rho: f32,
        eps: f32,
    },
    Adam {
        alpha: f32,
        beta1: f32,
        beta2: f32,
        eps: f32,
    },
    /// No (or more than one) class's keys were found.
    Unknown,
}

impl Algorithm {
    /// primitiv's defaults for a class.
    pub fn defaults(kind: OptimizerKind) -> Algorithm {
        let v: Vec<f32> = kind.float_keys().iter().map(|&(_, d)| d).collect();
        Algorithm::from_values(kind, &v)
    }

    /// The class, or `None` for [`Algorithm::Unknown`].
    pub fn kind(&self) -> Option<OptimizerKind> {
        Some(match self {
            Algorithm::Sgd { .. } => OptimizerKind::Sgd,
            Algorithm::MomentumSgd { .. } => OptimizerKind::MomentumSgd,
            Algorithm::AdaGrad { .. } => OptimizerKind::AdaGrad,
            Algorithm::RmsProp { .. } => OptimizerKind::RmsProp,
            Algorithm::AdaDelta { .. } => OptimizerKind::AdaDelta,
            Algorithm::Adam { .. } => OptimizerKind::Adam,
            Algorithm::Unknown => return None,
        })
    }

    /// The values in the order of [`OptimizerKind::float_keys`].
    fn values(&self) -> Vec<f32> {
        match *self {
            Algorithm::Sgd { eta } => vec![eta],
            Algorithm::MomentumSgd { eta, momentum } => vec![eta, momentum],
            Algorithm::AdaGrad { eta, eps } => vec![eta, eps],
            Algorithm::RmsProp { eta, alpha, eps } => vec![eta, alpha, eps],
            Algorithm::AdaDelta { rho, eps } => vec![rho, eps],
            Algorithm::Adam {
                alpha,
                beta1,
                beta2,
                eps,
            } => vec![alpha, beta1, beta2, eps],
            Algorithm::Unknown => Vec::new(),
        }
    }

    /// Built from values in the order of [`OptimizerKind::float_keys`] (same length).
    fn from_values(kind: OptimizerKind, v: &[f32]) -> Algorithm {
        match kind {
            OptimizerKind::Sgd => Algorithm::Sgd { eta: v[0] },
            OptimizerKind::MomentumSgd => Algorithm::MomentumSgd {
                eta: v[0],
                momentum: v[1],
            },
            OptimizerKind::AdaGrad => Algorithm::AdaGrad {
                eta: v[0],
                eps: v[1],
            },
            OptimizerKind::RmsProp => Algorithm::RmsProp {
                eta: v[0],
                alpha: v[1],
                eps: v[2],
            },
            OptimizerKind::AdaDelta => Algorithm::AdaDelta {
                rho: v[0],
                eps: v[1],
            },
            OptimizerKind::Adam => Algorithm::Adam {
                alpha: v[0],
                beta1: v[1],
                beta2: v[2],
                eps: v[3],
            },
        }
    }
}

/// A typed view of an [`Optimizer`] file: the base configs, the class inferred from
/// the keys, keys the view does not know (kept), and known keys the file lacks (filled
/// with primitiv's defaults, as primitiv's develop branch does on load).
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerSettings {
    /// `Optimizer.epoch` (default 0).
    pub epoch: u32,
    /// `Optimizer.lr_scale` (default 1).
    pub lr_scale: f32,
    /// `Optimizer.l2_strength` (default 0).
    pub l2_strength: f32,
    /// `Optimizer.clip_threshold` (default 0).
    pub clip_threshold: f32,
    /// The class and its hyper-parameters.
    pub algorithm: Algorithm,
    /// uint keys the view does not know, in file order.
    pub extra_uint: Vec<(Key, u32)>,
    /// float keys the view does not know, in file order.
    pub extra_float: Vec<(Key, f32)>,
    /// Known keys absent from the file (their defaults were used). primitiv v0.3.x
    /// refuses such files; develop accepts them.
    pub missing: Vec<&'static str>,
}

impl Default for OptimizerSettings {
    fn default() -> OptimizerSettings {
        OptimizerSettings {
            epoch: 0,
            lr_scale: 1.0,
            l2_strength: 0.0,
            clip_threshold: 0.0,
            algorithm: Algorithm::Unknown,
            extra_uint: Vec::new(),
            extra_float: Vec::new(),
            missing: Vec::new(),
        }
    }
}

const EPOCH: &str = "Optimizer.epoch";
const BASE_FLOATS: [(&str, f32); 3] = [
    ("Optimizer.lr_scale", 1.0),
    ("Optimizer.l2_strength", 0.0),
    ("Optimizer.clip_threshold", 0.0),
];

impl Optimizer {
    /// A uint config by key.
    pub fn uint(&self, key: &str) -> Option<u32> {
        self.uint_configs
            .iter()
            .find(|(k, _)| k == key)
            .map(|&(_, v)| v)
    }

    /// A float config by key.
    pub fn float(&self, key: &str) -> Option<f32> {
        self.float_configs
            .iter()
            .find(|(k, _)| k == key)
            .map(|&(_, v)| v)
    }

    /// The class, inferred from the float key prefixes: `Some` when the keys of
    /// exactly one class appear.
    ///
    /// ```
    /// use tensorfmt_primitiv::{Key, Optimizer, OptimizerKind};
    /// let o = Optimizer { uint_configs: vec![], float_configs: vec![(Key::from("SGD.eta"), 0.1)] };
    /// assert_eq!(o.kind(), Some(OptimizerKind::Sgd));
    /// assert_eq!(Optimizer::default().kind(), None);
    /// ```
    pub fn kind(&self) -> Option<OptimizerKind> {
        let mut found: Option<OptimizerKind> = None;
        for (k, _) in &self.float_configs {
            let bytes = k.as_bytes();
            let Some(dot) = bytes.iter().position(|&b| b == b'.') else {
                continue;
            };
            if let Some(kind) = OptimizerKind::from_prefix(&bytes[..dot]) {
                match found {
                    None => found = Some(kind),
                    Some(f) if f == kind => {}
                    Some(_) => return None,
                }
            }
        }
        found
    }

    /// The typed view (see [`OptimizerSettings`]).
    pub fn settings(&self) -> OptimizerSettings {
        let mut s = OptimizerSettings::default();
        let kind = self.kind();
        let mut known: Vec<&str> = vec![EPOCH];
        known.extend(BASE_FLOATS.iter().map(|&(k, _)| k));
        match self.uint(EPOCH) {
            Some(v) => s.epoch = v,
            None => s.missing.push(EPOCH),
        }
        let mut base = [s.lr_scale, s.l2_strength, s.clip_threshold];
        for (slot, &(key, _)) in base.iter_mut().zip(BASE_FLOATS.iter()) {
            match self.float(key) {
                Some(v) => *slot = v,
                None => s.missing.push(key),
            }
        }
        [s.lr_scale, s.l2_strength, s.clip_threshold] = base;
        if let Some(kind) = kind {
            let mut values = Vec::new();
            for &(key, default) in kind.float_keys() {
                known.push(key);
                values.push(self.float(key).unwrap_or_else(|| {
                    s.missing.push(key);
                    default
                }));
            }
            s.algorithm = Algorithm::from_values(kind, &values);
        }
        s.extra_uint = self
            .uint_configs
            .iter()
            .filter(|(k, _)| !known.iter().any(|n| k == n))
            .cloned()
            .collect();
        s.extra_float = self
            .float_configs
            .iter()
            .filter(|(k, _)| !known.iter().any(|n| k == n))
            .cloned()
            .collect();
        s
    }

    /// An Optimizer with the complete key set of the settings' class (readable by
    /// every primitiv version), then the extra keys. Keys are sorted within each map
    /// (primitiv's own order is hash-table order, which no reader relies on).
    pub fn from_settings(s: &OptimizerSettings) -> Optimizer {
        let mut uint_configs = vec![(Key::from(EPOCH), s.epoch)];
        uint_configs.extend(s.extra_uint.iter().cloned());
        let mut float_configs: Vec<(Key, f32)> = BASE_FLOATS
            .iter()
            .zip([s.lr_scale, s.l2_strength, s.clip_threshold])
            .map(|(&(k, _), v)| (Key::from(k), v))
            .collect();
        if let Some(kind) = s.algorithm.kind() {
            float_configs.extend(
                kind.float_keys()
                    .iter()
                    .zip(s.algorithm.values())
                    .map(|(&(k, _), v)| (Key::from(k), v)),
            );
        }
        float_configs.extend(s.extra_float.iter().cloned());
        let mut o = Optimizer {
            uint_configs: Vec::new(),
            float_configs: Vec::new(),
        };
        for (k, v) in uint_configs {
            if !o.uint_configs.iter().any(|(x, _)| *x == k) {
                o.uint_configs.push((k, v));
            }
        }
        for (k, v) in float_configs {
            if !o.float_configs.iter().any(|(x, _)| *x == k) {
                o.float_configs.push((k, v));
            }
        }
        o.uint_configs.sort_by(|a, b| a.0.cmp(&b.0));
        o.float_configs.sort_by(|a, b| a.0.cmp(&b.0));
        o
    }
}
