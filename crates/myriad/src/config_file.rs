//! The config file (SPEC C6): a flat TOML table whose keys are flag names. It is applied
//! by filling `MYRIAD_<KEY>` environment variables that are not already set, so every
//! flag with an `env` fallback can come from the file, and the precedence is simply
//! flags > environment > file > defaults.

use anyhow::Context;
use std::ffi::OsString;
use std::path::PathBuf;

/// Finds `--config FILE` (or `MYRIAD_CONFIG`) and applies the file, if any.
pub fn apply(args: impl IntoIterator<Item = OsString>) -> anyhow::Result<()> {
    let Some(path) = config_path(args) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    for (name, value) in parse(&text).with_context(|| format!("config file {}", path.display()))? {
        if std::env::var_os(&name).is_none() {
            std::env::set_var(name, value);
        }
    }
    Ok(())
}

fn config_path(args: impl IntoIterator<Item = OsString>) -> Option<PathBuf> {
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy().into_owned();
        if arg == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("MYRIAD_CONFIG").map(PathBuf::from)
}

/// Turns `max-connections = 20000` into `("MYRIAD_MAX_CONNECTIONS", "20000")`.
fn parse(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let table: toml::Table = text.parse()?;
    let mut out = Vec::new();
    for (key, value) in table {
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => anyhow::bail!(
                "key {key}: only strings, numbers and booleans are supported, not {}",
                other.type_str()
            ),
        };
        let name = format!("MYRIAD_{}", key.to_ascii_uppercase().replace('-', "_"));
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_variables() {
        let vars = parse(
            "listen = \"127.0.0.1:9\"\nmax-connections = 5\nheartbeat = 2.5\nno-nodelay = true\n",
        )
        .unwrap();
        assert!(vars.contains(&("MYRIAD_LISTEN".into(), "127.0.0.1:9".into())));
        assert!(vars.contains(&("MYRIAD_MAX_CONNECTIONS".into(), "5".into())));
        assert!(vars.contains(&("MYRIAD_HEARTBEAT".into(), "2.5".into())));
        assert!(vars.contains(&("MYRIAD_NO_NODELAY".into(), "true".into())));
    }

    #[test]
    fn tables_are_refused() {
        assert!(parse("[server]\nlisten = 1\n").is_err());
    }

    #[test]
    fn finds_the_path_in_either_form() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            config_path(args(&["myriad", "--config", "a.toml", "serve"])),
            Some("a.toml".into())
        );
        assert_eq!(
            config_path(args(&["myriad", "serve", "--config=b.toml"])),
            Some("b.toml".into())
        );
    }
}
