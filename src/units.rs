//! Human sizes and durations for `limit`: `512m`, `1.5k`, `30s`, `5m`, or plain numbers.
//!
//! Sizes are base 2 (`1k` = 1024 bytes). A bare number is bytes for sizes and milliseconds for
//! durations. Negative, non-finite and fractional-byte results are refused rather than rounded
//! into something the author did not write.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    #[error("`{0}` is not a size (use a number of bytes or a suffix k, m, g, t: `512m`, `1.5g`)")]
    BadSize(String),
    #[error("`{0}` is not a duration (use milliseconds or a suffix ms, s, m, h: `30s`, `5m`)")]
    BadDuration(String),
    #[error("`{0}` is too large")]
    Overflow(String),
    #[error("`{0}` must not be negative")]
    Negative(String),
}

/// Parse a byte size: `1024`, `1k`, `1.5k`, `512m`, `1g`, `2t` (also `kb`, `mib`, … spellings).
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let t = text.trim().to_ascii_lowercase();
    let (num, suffix) = split_number(&t).ok_or_else(|| UnitError::BadSize(text.to_string()))?;
    let mult: u64 = match suffix {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(UnitError::BadSize(text.to_string())),
    };
    scale(num, mult, text).map_err(|e| match e {
        UnitError::BadDuration(s) => UnitError::BadSize(s),
        other => other,
    })
}

/// Parse a duration into milliseconds: `250`, `250ms`, `30s`, `5m`, `1h`, `1.5s`.
pub fn parse_duration_ms(text: &str) -> Result<u64, UnitError> {
    let t = text.trim().to_ascii_lowercase();
    let (num, suffix) = split_number(&t).ok_or_else(|| UnitError::BadDuration(text.to_string()))?;
    let mult: u64 = match suffix {
        "" | "ms" => 1,
        "s" | "sec" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(UnitError::BadDuration(text.to_string())),
    };
    scale(num, mult, text)
}

/// Format bytes for humans: `512 MiB`, `1.5 KiB`, `17 B`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else if (value - value.round()).abs() < 0.05 {
        format!("{} {}", value.round() as u64, UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Format milliseconds for humans: `250 ms`, `1.5 s`, `5 min`.
pub fn format_duration_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        let s = ms as f64 / 1000.0;
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{s:.1} s")
        }
    } else if ms.is_multiple_of(3_600_000) {
        format!("{} h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{} min", ms / 60_000)
    } else {
        format!("{:.1} min", ms as f64 / 60_000.0)
    }
}

fn split_number(t: &str) -> Option<(&str, &str)> {
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, rest) = t.split_at(end);
    if num.is_empty() {
        return None;
    }
    Some((num, rest.trim()))
}

fn scale(num: &str, mult: u64, original: &str) -> Result<u64, UnitError> {
    if num.starts_with('-') {
        return Err(UnitError::Negative(original.to_string()));
    }
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| UnitError::Overflow(original.to_string()));
    }
    let f: f64 = num
        .parse()
        .map_err(|_| UnitError::BadDuration(original.to_string()))?;
    if !f.is_finite() {
        return Err(UnitError::BadDuration(original.to_string()));
    }
    let v = f * mult as f64;
    if v > u64::MAX as f64 / 2.0 {
        return Err(UnitError::Overflow(original.to_string()));
    }
    Ok(v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("1k"), Ok(1024));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert_eq!(parse_bytes("512m"), Ok(512 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert_eq!(parse_bytes(" 2 GiB "), Ok(2 << 30));
        assert_eq!(parse_bytes("1MB"), Ok(1 << 20));
        assert!(matches!(parse_bytes("-1k"), Err(UnitError::Negative(_))));
        assert!(matches!(parse_bytes("12x"), Err(UnitError::BadSize(_))));
        assert!(matches!(parse_bytes("k"), Err(UnitError::BadSize(_))));
        assert!(matches!(parse_bytes("1.2.3k"), Err(UnitError::BadSize(_))));
        assert!(matches!(
            parse_bytes("99999999999t"),
            Err(UnitError::Overflow(_))
        ));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("250"), Ok(250));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1_500));
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert!(parse_duration_ms("soon").is_err());
        assert!(parse_duration_ms("5d").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_bytes(17), "17 B");
        assert_eq!(format_bytes(512 << 20), "512 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_duration_ms(250), "250 ms");
        assert_eq!(format_duration_ms(1500), "1.5 s");
        assert_eq!(format_duration_ms(60_000), "1 min");
    }
}
