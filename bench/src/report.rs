//! What a section hands back, targets, and the report files.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// A goal from the issue, checked (never asserted).
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// The limit, as written in the issue.
    pub goal: String,
    /// The measured value (a ratio, MiB, a count); `None` when it could not be measured.
    pub value: Option<f64>,
    /// The limit (value must be <= limit).
    pub limit: f64,
    /// Unit of value and limit: "x" (ratio), "MiB", "failures".
    pub unit: String,
    /// `Some(true)` met, `Some(false)` missed, `None` not measured.
    pub met: Option<bool>,
    /// How the value was obtained.
    pub detail: String,
    /// What stands in the way of the target, found by profiling; shown
    /// when it is missed.
    pub obstacle: Option<String>,
}

impl Target {
    /// A "value <= limit" target.
    pub fn at_most(name: &str, goal: &str, value: Option<f64>, limit: f64, unit: &str, detail: String) -> Self {
        Target {
            name: name.to_string(),
            goal: goal.to_string(),
            value,
            limit,
            unit: unit.to_string(),
            met: value.map(|v| v <= limit),
            detail,
            obstacle: None,
        }
    }

    /// The same target with what stands in its way.
    pub fn because(mut self, obstacle: impl Into<String>) -> Self {
        self.obstacle = Some(obstacle.into());
        self
    }

    /// A target that could not be measured because cordon failed the run.
    pub fn cordon_failed(name: &str, goal: &str, limit: f64, unit: &str, detail: String) -> Self {
        Target {
            name: name.to_string(),
            goal: goal.to_string(),
            value: None,
            limit,
            unit: unit.to_string(),
            met: Some(false),
            detail,
            obstacle: None,
        }
    }

    /// The value as text.
    pub fn value_str(&self) -> String {
        match self.value {
            None if self.met == Some(false) => "cordon failed".into(),
            None => "not measured".into(),
            Some(v) if self.unit == "x" => format!("{v:.3}x"),
            Some(v) if self.unit == "failures" => format!("{v:.0} failures"),
            Some(v) => format!("{v:.2} {}", self.unit),
        }
    }

    /// met / MISSED / n/a.
    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "n/a",
        }
    }
}

/// What a section produced.
#[derive(Debug, Default)]
pub struct SectionOut {
    /// Raw and summarised data for results.json.
    pub data: Value,
    /// Its part of report.md (tables, notes).
    pub markdown: String,
    /// Targets it checked.
    pub targets: Vec<Target>,
    /// PNG files written (names relative to the output directory).
    pub charts: Vec<String>,
    /// Things that went wrong while it ran (the run exits non-zero).
    pub problems: Vec<String>,
    /// Observations (unexpected results of cordon itself, caveats).
    pub warnings: Vec<String>,
}

/// A section in results.json.
#[derive(Debug, Serialize)]
pub struct SectionRecord {
    /// Section name.
    pub name: String,
    /// Ran to completion with no problem.
    pub ok: bool,
    /// The error that stopped it, if any.
    pub error: Option<String>,
    /// Problems.
    pub problems: Vec<String>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// Wall time of the section.
    pub seconds: f64,
    /// 1-minute load average before and after (noise indicator).
    pub load: (f64, f64),
    /// Charts.
    pub charts: Vec<String>,
    /// Data.
    pub data: Value,
    /// Targets.
    pub targets: Vec<Target>,
    #[serde(skip)]
    /// Markdown.
    pub markdown: String,
}

/// Formats a markdown table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| {} |", header.join(" | "));
    // Right-align the columns whose cells all start like numbers.
    let numeric = |i: usize| {
        !rows.is_empty()
            && rows.iter().all(|r| {
                r.get(i)
                    .and_then(|c| c.trim_start_matches('*').chars().next())
                    .is_some_and(|ch| ch.is_ascii_digit() || ch == '-' || ch == '–')
            })
    };
    let _ = writeln!(
        s,
        "|{}|",
        (0..header.len())
            .map(|i| if i > 0 && numeric(i) { "---:" } else { "---" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        let _ = writeln!(s, "| {} |", r.join(" | "));
    }
    s
}

/// `v` with `d` decimals, or "–" when missing.
pub fn num(v: Option<f64>, d: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.d$}"),
        _ => "–".into(),
    }
}

/// The chart of every measured target, as measured / goal.
pub const TARGETS_CHART: &str = "targets.png";

/// Draws each measured ratio or size target as measured / goal on a log
/// axis (1 = at the goal; left of it: met). Returns false when no target
/// has a value to draw.
fn targets_chart(path: &Path, targets: &[&Target]) -> anyhow::Result<bool> {
    let bars: Vec<crate::charts::Bar> = targets
        .iter()
        .filter(|t| t.limit > 0.0)
        .filter_map(|t| {
            let v = t.value?;
            Some(crate::charts::Bar {
                label: t.name.clone(),
                value: (v / t.limit).max(1e-3),
                color: if t.met == Some(true) { 3 } else { 0 },
                note: format!("{} (goal {})", t.value_str(), t.goal),
            })
        })
        .collect();
    if bars.is_empty() {
        return Ok(false);
    }
    crate::charts::hbars(
        path,
        "Targets: measured / goal (≤ 1 is met)",
        "measured / goal (log scale)",
        &bars,
        true,
        &[crate::charts::Marker {
            at: 1.0,
            label: "goal".into(),
        }],
    )?;
    Ok(true)
}

/// Writes report.md and results.json.
pub fn write(
    out: &Path,
    meta: &Value,
    sections: &[SectionRecord],
    intro_notes: &[String],
    cleanup_problems: &[String],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let targets: Vec<&Target> = sections.iter().flat_map(|s| s.targets.iter()).collect();
    let json = serde_json::json!({
        "meta": meta,
        "notes": intro_notes,
        "targets": targets,
        "sections": sections,
        "cleanup_problems": cleanup_problems,
    });
    std::fs::write(out.join("results.json"), serde_json::to_vec_pretty(&json)?)?;

    let mut md = String::new();
    let _ = writeln!(md, "# cordon benchmark\n");
    let _ = writeln!(
        md,
        "Mode: **{}**, started {} on `{}` ({} CPUs), total {:.0} s. cordon, runc and crun were measured in \
         one run on the same machine, interleaved. Numbers from a machine that is doing other work are noisy: \
         compare ratios, and take final numbers on a quiet machine (load average is shown per section).\n",
        meta["mode"].as_str().unwrap_or("?"),
        meta["started"].as_str().unwrap_or("?"),
        meta["hostname"].as_str().unwrap_or("?"),
        meta["cpus"],
        meta["seconds"].as_f64().unwrap_or(0.0),
    );
    if let Some(v) = meta["versions"].as_object() {
        let rows: Vec<Vec<String>> = v
            .iter()
            .map(|(k, v)| vec![k.clone(), format!("`{}`", v.as_str().unwrap_or(""))])
            .collect();
        md.push_str(&table(&["component", "version"], &rows));
        md.push('\n');
    }
    for n in intro_notes {
        let _ = writeln!(md, "- {n}");
    }
    if !intro_notes.is_empty() {
        md.push('\n');
    }

    let _ = writeln!(md, "## Targets\n");
    let met = targets.iter().filter(|t| t.met == Some(true)).count();
    let missed = targets.iter().filter(|t| t.met == Some(false)).count();
    let _ = writeln!(
        md,
        "{met} met, {missed} missed, {} not measured. Targets are reported, never asserted.\n",
        targets.len() - met - missed
    );
    let rows: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.goal.clone(),
                t.value_str(),
                format!("**{}**", t.verdict()),
                t.detail.clone(),
            ]
        })
        .collect();
    md.push_str(&table(&["target", "goal", "measured", "verdict", "how"], &rows));
    md.push('\n');
    match targets_chart(&out.join(TARGETS_CHART), &targets) {
        Ok(true) => {
            let _ = writeln!(md, "![{TARGETS_CHART}]({TARGETS_CHART})\n");
        }
        Ok(false) => {}
        Err(e) => {
            let _ = writeln!(md, "- **problem:** chart {TARGETS_CHART}: {e}\n");
        }
    }
    let obstacles: Vec<&Target> = targets
        .iter()
        .copied()
        .filter(|t| t.met == Some(false) && t.obstacle.is_some())
        .collect();
    if !obstacles.is_empty() {
        let _ = writeln!(
            md,
            "### What stands in the way

From profiles of the supervisor and of `cordon run` on this kind of \
             machine (`perf record`, `strace -f -ttt`, micro-benchmarks of single syscalls); see \
             bench/README.md for how to reproduce them.\n"
        );
        for t in obstacles {
            let _ = writeln!(
                md,
                "- **{}** ({}): {}",
                t.name,
                t.value_str(),
                t.obstacle.as_deref().unwrap_or("")
            );
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Sections\n");
    let rows: Vec<Vec<String>> = sections
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                if s.ok { "ok".into() } else { "**FAILED**".into() },
                format!("{:.1}", s.seconds),
                format!("{:.2} / {:.2}", s.load.0, s.load.1),
            ]
        })
        .collect();
    md.push_str(&table(&["section", "status", "seconds", "load before / after"], &rows));
    md.push('\n');

    for s in sections {
        let _ = writeln!(md, "## {}\n", s.name);
        if let Some(e) = &s.error {
            let _ = writeln!(md, "**The section failed to run:** {e}\n");
        }
        for p in &s.problems {
            let _ = writeln!(md, "- **problem:** {p}");
        }
        for w in &s.warnings {
            let _ = writeln!(md, "- **note:** {w}");
        }
        if !s.problems.is_empty() || !s.warnings.is_empty() {
            md.push('\n');
        }
        md.push_str(&s.markdown);
        for c in &s.charts {
            let _ = writeln!(md, "\n![{c}]({c})");
        }
        md.push('\n');
    }
    if !cleanup_problems.is_empty() {
        let _ = writeln!(md, "## Cleanup problems\n");
        for p in cleanup_problems {
            let _ = writeln!(md, "- {p}");
        }
    }
    std::fs::write(out.join("report.md"), md)?;
    Ok(())
}
