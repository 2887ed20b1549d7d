//! SVG plots of the figures (plotters' SVG backend: no system libraries).

use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Axes<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    /// Formats an x value (after any transform the caller applied) as a tick label.
    pub x_ticks: &'a dyn Fn(&f64) -> String,
}

/// A tick label only at whole numbers (rank counts, powers of two).
fn whole(x: f64) -> Option<i64> {
    ((x - x.round()).abs() < 1e-6).then_some(x.round() as i64)
}

/// Every plot the results hold, drawn into `out`: micro.svg, overhead.svg,
/// bandwidth.svg and apps.svg (from results.json's parts, whichever are present).
pub fn all(out: &Path, results: &Value) -> Result<(), String> {
    if let Some(rows) = results["micro"].as_array() {
        let mut variants: Vec<&str> = Vec::new();
        for r in rows {
            if let Some(v) = r["variant"].as_str() {
                if !variants.contains(&v) {
                    variants.push(v);
                }
            }
        }
        let series: Vec<Series> = variants
            .iter()
            .map(|&v| Series {
                name: if v == "mpi" {
                    "hand-written MPI + OpenCL".into()
                } else if v == "vendor" {
                    "the vendor, one process, n devices".into()
                } else {
                    format!("MirrorCL, {v}")
                },
                points: rows
                    .iter()
                    .filter(|r| r["variant"] == v)
                    .filter_map(|r| Some((r["ranks"].as_f64()?, r["us_per_iteration"].as_f64()?)))
                    .collect(),
            })
            .collect();
        lines(
            &out.join("micro.svg"),
            &Axes {
                title: "IV.7.2 microbenchmark: n² 16-byte copies per iteration (lower is better)",
                x: "ranks (one device each)",
                y: "µs per iteration",
                x_ticks: &|x| whole(*x).map(|r| r.to_string()).unwrap_or_default(),
            },
            &series,
        )?;
    }
    if results["overhead"].is_object() {
        let bars_: Vec<(String, f64)> = crate::overhead::lines(&results["overhead"])
            .into_iter()
            .map(|(fam, name, n, m, _, _, _, _)| (format!("{fam}: {name}"), m / n))
            .collect();
        bars(
            &out.join("overhead.svg"),
            "Cost per command, MirrorCL / native (time; 1 = same; lower is better)",
            "MirrorCL time / native time (median)",
            &bars_,
            1.0,
        )?;
    }
    if let Some(sizes) = results["bandwidth"].as_array() {
        let mut names: Vec<String> = Vec::new();
        for s in sizes {
            for k in s["series"].as_object().into_iter().flat_map(|m| m.keys()) {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
        // The vendor's copy within one process may be device-local (up to TB/s): it is
        // in the table, not on a scale it would flatten.
        names.retain(|n| n != crate::bandwidth::NATIVE);
        names.sort_by_key(|n| crate::bandwidth::SERIES.iter().position(|s| s == n));
        let series: Vec<Series> = names
            .iter()
            .map(|n| Series {
                name: n.clone(),
                points: sizes
                    .iter()
                    .filter_map(|s| {
                        let b = s["bytes"].as_f64()?;
                        Some((b.log2(), s["series"][n]["gbytes_per_s"].as_f64()?))
                    })
                    .collect(),
            })
            .collect();
        lines(
            &out.join("bandwidth.svg"),
            &Axes {
                title: "Copy between devices of two ranks (higher is better)",
                x: "bytes per copy",
                y: "GB/s",
                x_ticks: &|x| {
                    whole(*x)
                        .filter(|e| e % 2 == 0 && *e >= 0)
                        .map(|e| crate::bandwidth::size_name(1usize << e))
                        .unwrap_or_default()
                },
            },
            &series,
        )?;
    }
    if let Some(rows) = results["apps"].as_array() {
        let mut apps: Vec<&str> = Vec::new();
        for r in rows {
            if let Some(a) = r["app"].as_str() {
                if !apps.contains(&a) {
                    apps.push(a);
                }
            }
        }
        // Results of before the threaded variant have no "threaded": one host thread.
        let threaded = |r: &Value| r["threaded"].as_bool().unwrap_or(false);
        let base = |app: &str| {
            rows.iter()
                .find(|r| {
                    r["app"] == app && r["mode"] == "native" && r["devices"] == 1 && !threaded(r)
                })
                .and_then(|r| r["total_s"].as_f64())
        };
        let mut ranks: Vec<f64> = Vec::new();
        let variants = apps.iter().flat_map(|&a| {
            [false, true]
                .into_iter()
                .filter(move |&t| rows.iter().any(|r| r["app"] == a && threaded(r) == t))
                .map(move |t| (a, t))
        });
        let mut series: Vec<Series> = variants
            .map(|(a, t)| Series {
                name: if t {
                    format!("{a}, a host thread per device")
                } else {
                    a.into()
                },
                points: rows
                    .iter()
                    .filter(|r| r["app"] == a && r["mode"] == "mirrorcl" && threaded(r) == t)
                    .filter_map(|r| {
                        let n = r["devices"].as_f64()?;
                        if !ranks.contains(&n) {
                            ranks.push(n);
                        }
                        Some((n, base(a)? / r["total_s"].as_f64()?))
                    })
                    .collect(),
            })
            .collect();
        series.push(Series {
            name: REFERENCE.into(),
            points: ranks.iter().map(|&n| (n, n)).collect(),
        });
        lines(
            &out.join("apps.svg"),
            &Axes {
                title: "Strong scaling under MirrorCL: speedup over the vendor's platform on one device",
                x: "ranks (one device each)",
                y: "speedup",
                x_ticks: &|x| whole(*x).map(|r| r.to_string()).unwrap_or_default(),
            },
            &series,
        )?;
    }
    Ok(())
}

const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// A series drawn as a reference (ideal scaling, a floor) rather than a measurement.
pub const REFERENCE: &str = "ideal";

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

/// Lines with markers, one per series; y from 0.
pub fn lines(path: &Path, axes: &Axes, series: &[Series]) -> Result<(), String> {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Ok(());
    }
    if x0 == x1 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let pad = (x1 - x0) * 0.04;
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(axes.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), 0.0..(y1 * 1.12).max(1e-9))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .x_label_formatter(axes.x_ticks)
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let colour = if s.name == REFERENCE {
            RGBColor(0, 0, 0)
        } else {
            COLOURS[i % COLOURS.len()]
        };
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Horizontal bars, one per (label, value), with a reference line at `reference`.
pub fn bars(
    path: &Path,
    title: &str,
    x_desc: &str,
    bars: &[(String, f64)],
    reference: f64,
) -> Result<(), String> {
    if bars.is_empty() {
        return Ok(());
    }
    let max = bars.iter().map(|b| b.1).fold(reference, f64::max) * 1.15;
    let n = bars.len();
    let height = 120 + 34 * n as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..max, -0.5..(n as f64 - 0.5))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_labels(n)
        .y_label_formatter(&|y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let y = i as f64;
            let colour = if b.1 <= reference {
                COLOURS[2]
            } else {
                COLOURS[1]
            };
            Rectangle::new([(0.0, y - 0.35), (b.1, y + 0.35)], colour.filled())
        }))
        .map_err(err)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(reference, -0.5), (reference, n as f64 - 0.5)],
            BLACK.stroke_width(1),
        )))
        .map_err(err)?;
    root.present().map_err(err)
}
