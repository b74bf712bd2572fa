//! The `--set KEY=VALUE` settings a format's writer reads ([`WriteOptions::extra`]),
//! each declared once with the values it takes and the file kinds it applies to.
//!
//! A format crate lists its settings in one table of [`Setting`]s; the facade checks
//! the keys and values a user gives against it before anything is opened, and the
//! writer checks them again against the kind it settles on (a PVP file's kind may
//! only be known from the tensors' names). So a setting is used or refused, never
//! ignored: a misspelt key, a value the writer would not understand and a setting of
//! another kind (`nx` for a dense PVP file, whose geometry is the values' shape) are
//! errors, not silent no-ops. The writers read the values through the same parsers
//! ([`WriteOptions::flag`], [`WriteOptions::count`], ...), so the check and the use
//! cannot disagree.

use std::collections::BTreeMap;

use crate::{Error, Result, WriteOptions};

/// What a setting's value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingValue {
    /// `true` or `false` (`1`/`0` and `yes`/`no` too, any case).
    Flag,
    /// A positive whole number.
    Count,
    /// A whole number from 0 to 2³¹ − 1 (a protobuf `int32` that counts).
    Int32,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Positive whole numbers separated by `,` or `x`: `3,3`, `10x10`.
    Counts,
    /// Any text.
    Text,
}

impl SettingValue {
    /// How the value is written in help and errors.
    pub fn describe(self) -> String {
        match self {
            SettingValue::Flag => "true|false".into(),
            SettingValue::Count => "N>0".into(),
            SettingValue::Int32 => "N>=0".into(),
            SettingValue::Choice(words) => words.join("|"),
            SettingValue::Counts => "N,N,...".into(),
            SettingValue::Text => "TEXT".into(),
        }
    }

    /// Checks `value` against the grammar (the error says what is expected).
    fn check(self, value: &str) -> std::result::Result<(), String> {
        let ok = match self {
            SettingValue::Flag => parse_flag(value).is_some(),
            SettingValue::Count => parse_count(value).is_some(),
            SettingValue::Int32 => parse_int32(value).is_some(),
            SettingValue::Choice(words) => words.contains(&value),
            SettingValue::Counts => parse_counts(value).is_some(),
            SettingValue::Text => true,
        };
        if ok {
            return Ok(());
        }
        Err(match self {
            SettingValue::Flag => "expected true or false".into(),
            SettingValue::Count => "expected a positive whole number".into(),
            SettingValue::Int32 => "expected a whole number from 0 to 2147483647".into(),
            SettingValue::Choice(words) => format!("expected one of {}", words.join(", ")),
            SettingValue::Counts => "expected positive whole numbers such as 3,3".into(),
            SettingValue::Text => unreachable!("any text is a Text value"),
        })
    }
}

/// One `--set` key of a format's writer.
///
/// ```
/// use tensorfmt_core::settings::{check, Setting, SettingValue};
/// use tensorfmt_core::WriteOptions;
/// const TABLE: &[Setting] = &[
///     Setting::new("nx", SettingValue::Count).for_kinds(&["sparse"]),
///     Setting::new("comment", SettingValue::Text),
/// ];
/// let mut o = WriteOptions::default();
/// o.set("nx", "4")?;
/// assert!(check("pvp", TABLE, Some("sparse"), &o).is_ok());
/// assert!(check("pvp", TABLE, Some("dense"), &o).unwrap_err().to_string().contains("sparse"));
/// o.set("nx", "four")?;
/// assert!(check("pvp", TABLE, None, &o).unwrap_err().to_string().contains("positive"));
/// assert_eq!(o.count("nx").unwrap_err().to_string().contains("nx=four"), true);
/// # Ok::<(), tensorfmt_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The key; one ending in `.` is a prefix (`type.` for `type.<layer>`).
    pub key: &'static str,
    /// The values it takes.
    pub value: SettingValue,
    /// The file kinds (the format's kind identifiers) it applies to; empty: all.
    pub kinds: &'static [&'static str],
}

impl Setting {
    /// A setting of every kind.
    pub const fn new(key: &'static str, value: SettingValue) -> Setting {
        Setting {
            key,
            value,
            kinds: &[],
        }
    }

    /// The same setting, for these kinds only.
    pub const fn for_kinds(self, kinds: &'static [&'static str]) -> Setting {
        Setting { kinds, ..self }
    }

    /// True when `key` is this setting (or, for a prefix, starts with it).
    pub fn matches(&self, key: &str) -> bool {
        self.key == key || (self.key.ends_with('.') && key.starts_with(self.key))
    }

    /// `key=VALUES`: `nx=N>0`, `type.<name>=TEXT`.
    pub fn usage(&self) -> String {
        let key = if self.key.ends_with('.') {
            format!("{}<name>", self.key)
        } else {
            self.key.to_string()
        };
        format!("{key}={}", self.value.describe())
    }

    /// [`Setting::usage`], and the kinds when not all: `nx=N>0 (sparse, weights)`.
    pub fn describe(&self) -> String {
        let mut s = self.usage();
        if !self.kinds.is_empty() {
            s.push_str(&format!(" ({})", self.kinds.join(", ")));
        }
        s
    }
}

/// Checks every setting of `options.extra` against `table`, the settings of the
/// `format` writer: the key must be listed, its value must be one the setting takes,
/// and, when `kind` (a kind identifier) is known, the setting must apply to it.
pub fn check(
    format: &str,
    table: &[Setting],
    kind: Option<&str>,
    options: &WriteOptions,
) -> Result<()> {
    check_map(format, table, kind, &options.extra)
}

fn check_map(
    format: &str,
    table: &[Setting],
    kind: Option<&str>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    for (key, value) in extra {
        let Some(setting) = table.iter().find(|s| s.matches(key)) else {
            let list = if table.is_empty() {
                "none".to_string()
            } else {
                table.iter().map(|s| s.key).collect::<Vec<_>>().join(", ")
            };
            return Err(Error::Invalid(format!(
                "setting {key:?} means nothing to the {format} writer (its settings: {list}; \
                 compress and threads for npz, npy and safetensors)"
            )));
        };
        setting
            .value
            .check(value)
            .map_err(|why| Error::Invalid(format!("setting {key}={value:?}: {why}")))?;
        if let Some(kind) = kind {
            if !setting.kinds.is_empty() && !setting.kinds.contains(&kind) {
                return Err(Error::Invalid(format!(
                    "setting {key:?} means nothing to a {format} {kind} file (it is for {})",
                    setting.kinds.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// A [`SettingValue::Flag`] value: `Some(true)` for `true`, `1`, `yes` (any case),
/// `Some(false)` for `false`, `0`, `no`, `None` for anything else.
///
/// ```
/// assert_eq!(tensorfmt_core::settings::parse_flag("Yes"), Some(true));
/// ```
pub fn parse_flag(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

fn parse_count(v: &str) -> Option<usize> {
    v.trim().parse::<usize>().ok().filter(|&n| n > 0)
}

fn parse_int32(v: &str) -> Option<i32> {
    v.trim().parse::<i32>().ok().filter(|&n| n >= 0)
}

fn parse_counts(v: &str) -> Option<Vec<usize>> {
    v.split([',', 'x']).map(parse_count).collect()
}

impl WriteOptions {
    fn setting<T>(
        &self,
        key: &str,
        parse: fn(&str) -> Option<T>,
        grammar: SettingValue,
    ) -> Result<Option<T>> {
        self.extra
            .get(key)
            .map(|v| {
                parse(v).ok_or_else(|| {
                    let why = grammar.check(v).err().unwrap_or_default();
                    Error::Invalid(format!("setting {key}={v}: {why}"))
                })
            })
            .transpose()
    }

    /// A [`SettingValue::Flag`] setting; absent is `false`.
    pub fn flag(&self, key: &str) -> Result<bool> {
        Ok(self
            .setting(key, parse_flag, SettingValue::Flag)?
            .unwrap_or(false))
    }

    /// A [`SettingValue::Count`] setting.
    pub fn count(&self, key: &str) -> Result<Option<usize>> {
        self.setting(key, parse_count, SettingValue::Count)
    }

    /// A [`SettingValue::Int32`] setting.
    pub fn int32(&self, key: &str) -> Result<Option<i32>> {
        self.setting(key, parse_int32, SettingValue::Int32)
    }

    /// A [`SettingValue::Counts`] setting.
    pub fn counts(&self, key: &str) -> Result<Option<Vec<usize>>> {
        self.setting(key, parse_counts, SettingValue::Counts)
    }

    /// A [`SettingValue::Text`] or [`SettingValue::Choice`] setting, as given.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.extra.get(key).map(String::as_str)
    }

    /// A setting the user gives (`extra`: parsed, an error when it does not parse),
    /// else the source layout's ([`WriteOptions::source_layout`]: a writer's default,
    /// left out when it does not parse, never an error).
    fn setting_or_layout<T>(
        &self,
        key: &str,
        parse: fn(&str) -> Option<T>,
        grammar: SettingValue,
    ) -> Result<Option<T>> {
        Ok(match self.setting(key, parse, grammar)? {
            Some(v) => Some(v),
            None => self.source_layout.get(key).and_then(|v| parse(v)),
        })
    }

    /// [`WriteOptions::flag`], else the source layout's; `None` when neither says.
    pub fn flag_or_layout(&self, key: &str) -> Result<Option<bool>> {
        self.setting_or_layout(key, parse_flag, SettingValue::Flag)
    }

    /// [`WriteOptions::count`], else the source layout's.
    pub fn count_or_layout(&self, key: &str) -> Result<Option<usize>> {
        self.setting_or_layout(key, parse_count, SettingValue::Count)
    }

    /// [`WriteOptions::int32`], else the source layout's.
    pub fn int32_or_layout(&self, key: &str) -> Result<Option<i32>> {
        self.setting_or_layout(key, parse_int32, SettingValue::Int32)
    }

    /// [`WriteOptions::counts`], else the source layout's.
    pub fn counts_or_layout(&self, key: &str) -> Result<Option<Vec<usize>>> {
        self.setting_or_layout(key, parse_counts, SettingValue::Counts)
    }

    /// [`WriteOptions::text`], else the source layout's.
    pub fn text_or_layout(&self, key: &str) -> Option<&str> {
        self.text(key)
            .or_else(|| self.source_layout.get(key).map(String::as_str))
    }

    /// Whether `key` is given, by the user or by the source's layout.
    pub fn gives(&self, key: &str) -> bool {
        self.extra.contains_key(key) || self.source_layout.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Setting] = &[
        Setting::new("flag", SettingValue::Flag),
        Setting::new("n", SettingValue::Count).for_kinds(&["a"]),
        Setting::new("i", SettingValue::Int32),
        Setting::new("c", SettingValue::Choice(&["x", "y"])),
        Setting::new("dims", SettingValue::Counts),
        Setting::new("type.", SettingValue::Text),
    ];

    fn with(key: &str, value: &str) -> WriteOptions {
        let mut o = WriteOptions::default();
        o.set(key, value).unwrap();
        o
    }

    #[test]
    fn values_are_checked_by_their_grammar() {
        for (k, good, bad) in [
            ("flag", "TRUE", "maybe"),
            ("n", "3", "0"),
            ("n", "3", "-1"),
            ("n", "3", "abc"),
            ("i", "0", "-5"),
            ("i", "2147483647", "2147483648"),
            ("c", "y", "z"),
            ("dims", "3,3", "3,,3"),
            ("dims", "10x10", "0,3"),
        ] {
            assert!(
                check("f", TABLE, None, &with(k, good)).is_ok(),
                "{k}={good}"
            );
            let e = check("f", TABLE, None, &with(k, bad))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("{k}=\"{bad}\"")), "{e}");
        }
        assert!(check("f", TABLE, None, &with("type.conv1", "")).is_ok());
        let e = check("f", TABLE, None, &with("typo", "1"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"typo\" means nothing") && e.contains("flag, n, i"),
            "{e}"
        );
    }

    #[test]
    fn kinds_limit_a_setting() {
        assert!(check("f", TABLE, Some("a"), &with("n", "2")).is_ok());
        let e = check("f", TABLE, Some("b"), &with("n", "2"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a f b file") && e.contains("for a"), "{e}");
    }

    #[test]
    fn readers_parse_as_the_check_does() {
        assert!(!with("flag", "no").flag("flag").unwrap());
        assert!(!WriteOptions::default().flag("flag").unwrap());
        assert_eq!(with("n", " 4 ").count("n").unwrap(), Some(4));
        assert!(with("n", "x").count("n").is_err());
        assert_eq!(
            with("dims", "2x5").counts("dims").unwrap(),
            Some(vec![2, 5])
        );
        assert_eq!(with("i", "7").int32("i").unwrap(), Some(7));
        assert_eq!(
            Setting::new("type.", SettingValue::Text).describe(),
            "type.<name>=TEXT"
        );
        assert_eq!(TABLE[1].describe(), "n=N>0 (a)");
        assert_eq!(TABLE[1].usage(), "n=N>0");
    }

    #[test]
    fn the_users_setting_comes_before_the_source_layout_which_is_never_an_error() {
        let mut o = with("n", "3");
        o.source_layout.insert("n".into(), "5".into());
        o.source_layout.insert("i".into(), "x".into());
        o.source_layout.insert("flag".into(), "false".into());
        assert_eq!(o.count_or_layout("n").unwrap(), Some(3));
        assert_eq!(o.int32_or_layout("i").unwrap(), None);
        assert_eq!(o.flag_or_layout("flag").unwrap(), Some(false));
        assert_eq!(o.text_or_layout("flag"), Some("false"));
        assert!(o.gives("flag") && o.gives("n") && !o.gives("dims"));
        o.extra.insert("n".into(), "x".into());
        assert!(o.count_or_layout("n").is_err());
    }
}
