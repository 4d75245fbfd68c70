//! The memory an exploration may take: the machine's (from `/proc/meminfo`), the process's
//! address-space limit (`ulimit -v`, from `/proc/self/limits`), the process's resident
//! memory now (from `/proc/self/status`), and sizes written as `4GiB` or `512M`.

/// What the default bound leaves to the rest of the machine: it takes half of the memory
/// available when the check starts (and never more than half of the address-space limit,
/// which also counts memory reserved but never touched).
pub fn default_bound() -> u64 {
    let available = meminfo("MemAvailable:").or_else(|| meminfo("MemTotal:"));
    let limit = address_space_limit();
    match (available, limit) {
        (Some(a), Some(l)) => (a / 2).min(l / 2),
        (Some(a), None) => a / 2,
        (None, Some(l)) => l / 2,
        (None, None) => u64::MAX,
    }
}

/// A field of `/proc/meminfo`, in bytes.
fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    kilobytes_field(&text, field)
}

fn kilobytes_field(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb.saturating_mul(1024))
}

/// The soft limit on the address space, when there is one.
fn address_space_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The process's resident memory now, in bytes (0 where it cannot be read).
pub fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| kilobytes_field(&text, "VmRSS:"))
        .unwrap_or(0)
}

/// Reads a size: a number of bytes, or with a unit `K`, `M`, `G`, `T` (powers of 1024,
/// with or without `iB` or `B`).
///
/// # Errors
///
/// Anything else, with the forms it takes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(size_error(text)),
    };
    let value: f64 = number.parse().map_err(|_| size_error(text))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(size_error(text));
    }
    Ok(bytes as u64)
}

fn size_error(text: &str) -> String {
    format!("`{text}` is not a size: write bytes, or a number with K, M, G or T (e.g. 4GiB, 512M)")
}

/// A size for people: `1.5 GiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_and_without_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5 G"), Ok(3 << 29));
        assert_eq!(parse_size("64kb"), Ok(64 << 10));
        for bad in ["", "GiB", "4 parsecs", "-1G", "0"] {
            let error = parse_size(bad).unwrap_err();
            assert!(error.contains("4GiB"), "{bad}: {error}");
        }
        assert_eq!(format_size(1536 << 20), "1.5 GiB");
        assert_eq!(format_size(100), "100 B");
    }

    #[test]
    fn the_machine_and_the_process_are_read() {
        assert!(resident() > 0);
        let bound = default_bound();
        assert!(bound > 0 && bound < u64::MAX);
        let text = "MemTotal:       16384 kB\nMemAvailable:    8192 kB\n";
        assert_eq!(kilobytes_field(text, "MemAvailable:"), Some(8 << 20));
    }
}
