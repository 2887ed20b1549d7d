//! The format `MIRRORCL_RECORD=FILE` writes (`runtime/src/record.rs`, one file per rank:
//! `FILE.<rank>`), and its reader. One item per line, fields separated by one space, in
//! the order the rank's schedulers saw them; `CTX` numbers the context (each has its own
//! scheduler and buffer ids):
//!
//! ```text
//! # mirrorcl-record 1
//! ranks SIZE RANK
//! device CTX INDEX OWNER GROUP [apart]      apart: DeviceDesc::ranges_apart
//! buffer CTX ID SIZE INIT                  INIT: host | none | device:INDEX
//! attach CTX BUFFER DEVICE
//! release CTX BUFFER
//! command CTX TYPE DEVICE AT STREAM WORK FILLS BLOCKING WAITS ACCESSES
//! hostwrote CTX BUFFER START END
//! ```
//!
//! In `command`: `TYPE` is the `CL_COMMAND_*` value, `DEVICE` the queue's device,
//! `AT` `device` or `host` (runs on the host copy), `STREAM` the queue's stream,
//! `WORK` `vendor` (a vendor command where it runs) or `host` (nothing to run), `FILLS`
//! the bytes of host memory a read fills (`-` for none), `BLOCKING` `0` or `1`, `WAITS`
//! the devices of the wait list's device commands (comma-separated, `-` for none; only
//! for a blocking command or one at the host, whose wait list is not the queue's
//! unfinished commands), `ACCESSES` `BUFFER:START:END:MODE[:a]` (root-buffer byte range,
//! `MODE` `r`, `w` or `rw`, `:a` where it goes through a sub-buffer or image),
//! comma-separated, `-` for none. Lines starting with `#` are
//! comments.

use super::{At, Command, Item, Work};
use crate::{Access, DeviceDesc, Location, Mode};

/// A recorded stream: what one rank of a `ranks`-rank run saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    pub ranks: u32,
    pub rank: u32,
    pub items: Vec<(u64, Item)>,
}

/// One access as the format writes it (`BUFFER:START:END:MODE[:FLAGS]`, flags `a`
/// aliased, `p` pass-through).
pub fn access_field(a: &Access) -> String {
    let mode = match a.mode {
        Mode::Read => "r",
        Mode::Write => "w",
        Mode::ReadWrite => "rw",
    };
    let (start, end) = (a.range.start, a.range.end);
    let flags = match (a.aliased, a.pass_through) {
        (false, false) => "",
        (true, false) => ":a",
        (false, true) => ":p",
        (true, true) => ":ap",
    };
    format!("{}:{start}:{end}:{mode}{flags}", a.buffer)
}

/// One item as a line of the format (without the newline).
pub fn line(ctx: u64, item: &Item) -> String {
    match item {
        Item::Device { index, desc } => {
            let apart = if desc.ranges_apart { " apart" } else { "" };
            format!("device {ctx} {index} {} {}{apart}", desc.owner, desc.group)
        }
        Item::Buffer { id, size, initial } => {
            let init = match initial {
                None => "none".to_string(),
                Some(Location::Host) => "host".to_string(),
                Some(Location::Device(d)) => format!("device:{d}"),
            };
            format!("buffer {ctx} {id} {size} {init}")
        }
        Item::Attach { buffer, device } => format!("attach {ctx} {buffer} {device}"),
        Item::Release { buffer } => format!("release {ctx} {buffer}"),
        Item::HostWrote { buffer, range } => {
            format!("hostwrote {ctx} {buffer} {} {}", range.start, range.end)
        }
        Item::Command(c) => {
            let list = |v: Vec<String>| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    v.join(",")
                }
            };
            format!(
                "command {ctx} {} {} {} {} {} {} {} {} {}",
                c.command_type,
                c.device,
                if c.at == At::Host { "host" } else { "device" },
                c.stream,
                if c.work == Work::Vendor {
                    "vendor"
                } else {
                    "host"
                },
                c.fills_host.map_or("-".to_string(), |n| n.to_string()),
                u8::from(c.blocking),
                list(c.waits.iter().map(u32::to_string).collect()),
                list(c.accesses.iter().map(access_field).collect()),
            )
        }
    }
}

fn num<T: std::str::FromStr>(s: Option<&str>, what: &str) -> Result<T, String> {
    let s = s.ok_or_else(|| format!("missing {what}"))?;
    s.parse().map_err(|_| format!("bad {what}: {s:?}"))
}

fn parse_item(fields: &[&str]) -> Result<(u64, Item), String> {
    let mut it = fields.iter().copied();
    let kind = it.next().unwrap_or("");
    let ctx: u64 = num(it.next(), "context")?;
    let item = match kind {
        "device" => Item::Device {
            index: num(it.next(), "device index")?,
            desc: DeviceDesc {
                owner: num(it.next(), "owner")?,
                group: num(it.next(), "group")?,
                ranges_apart: match it.next() {
                    None => false,
                    Some("apart") => true,
                    Some(x) => return Err(format!("bad device flag {x:?}")),
                },
            },
        },
        "buffer" => Item::Buffer {
            id: num(it.next(), "buffer id")?,
            size: num(it.next(), "size")?,
            initial: match it.next() {
                Some("none") => None,
                Some("host") => Some(Location::Host),
                Some(d) => Some(Location::Device(num(
                    d.strip_prefix("device:"),
                    "initial device",
                )?)),
                None => return Err("missing initial location".into()),
            },
        },
        "attach" => Item::Attach {
            buffer: num(it.next(), "buffer")?,
            device: num(it.next(), "device")?,
        },
        "release" => Item::Release {
            buffer: num(it.next(), "buffer")?,
        },
        "hostwrote" => Item::HostWrote {
            buffer: num(it.next(), "buffer")?,
            range: num(it.next(), "start")?..num(it.next(), "end")?,
        },
        "command" => {
            let command_type = num(it.next(), "command type")?;
            let device = num(it.next(), "device")?;
            let at = match it.next() {
                Some("device") => At::Device,
                Some("host") => At::Host,
                other => return Err(format!("bad AT: {other:?}")),
            };
            let stream = num(it.next(), "stream")?;
            let work = match it.next() {
                Some("vendor") => Work::Vendor,
                Some("host") => Work::Host,
                other => return Err(format!("bad WORK: {other:?}")),
            };
            let fills_host = match it.next() {
                Some("-") => None,
                s => Some(num(s, "FILLS")?),
            };
            let blocking = match it.next() {
                Some("0") => false,
                Some("1") => true,
                other => return Err(format!("bad BLOCKING: {other:?}")),
            };
            let waits = match it.next() {
                Some("-") => Vec::new(),
                Some(s) => s
                    .split(',')
                    .map(|d| num(Some(d), "wait device"))
                    .collect::<Result<_, _>>()?,
                None => return Err("missing WAITS".into()),
            };
            let accesses = match it.next() {
                Some("-") => Vec::new(),
                Some(s) => s
                    .split(',')
                    .map(|a| {
                        let p: Vec<&str> = a.split(':').collect();
                        let flags = p.get(4).copied().unwrap_or("");
                        if !(4..=5).contains(&p.len()) || !["", "a", "p", "ap"].contains(&flags) {
                            return Err(format!("bad access {a:?}"));
                        }
                        Ok(Access {
                            buffer: num(Some(p[0]), "access buffer")?,
                            range: num(Some(p[1]), "access start")?..num(Some(p[2]), "access end")?,
                            mode: match p[3] {
                                "r" => Mode::Read,
                                "w" => Mode::Write,
                                "rw" => Mode::ReadWrite,
                                m => return Err(format!("bad mode {m:?}")),
                            },
                            aliased: flags.contains('a'),
                            pass_through: flags.contains('p'),
                        })
                    })
                    .collect::<Result<_, _>>()?,
                None => return Err("missing ACCESSES".into()),
            };
            Item::Command(Command {
                command_type,
                device,
                at,
                stream,
                work,
                fills_host,
                blocking,
                waits,
                accesses,
            })
        }
        other => return Err(format!("unknown item {other:?}")),
    };
    if it.next().is_some() {
        return Err("extra fields".into());
    }
    Ok((ctx, item))
}

/// Parses a recorded stream.
pub fn parse(text: &str) -> Result<Recording, String> {
    let mut rec = Recording::default();
    let mut header = false;
    for (n, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = l.split(' ').collect();
        let at = |e: String| format!("line {}: {e}: {l}", n + 1);
        if fields[0] == "ranks" {
            rec.ranks = num(fields.get(1).copied(), "ranks").map_err(at)?;
            rec.rank = num(fields.get(2).copied(), "rank").map_err(at)?;
            header = true;
            continue;
        }
        rec.items.push(parse_item(&fields).map_err(at)?);
    }
    if !header {
        return Err("no `ranks SIZE RANK` line".into());
    }
    Ok(rec)
}

pub fn read(path: &std::path::Path) -> Result<Recording, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

impl Recording {
    /// Emits the stream for `ranks` ranks: the recorded owners when `ranks` is the
    /// recorded size, otherwise device `i` goes to rank `i % ranks` (round-robin, one
    /// vendor group per rank).
    pub fn emit(&self, ranks: u32, out: &mut dyn FnMut(u64, &Item)) {
        for (ctx, item) in &self.items {
            match item {
                Item::Device { index, desc } if ranks != self.ranks => {
                    let desc = DeviceDesc {
                        owner: index % ranks,
                        group: 0,
                        ranges_apart: desc.ranges_apart,
                    };
                    out(
                        *ctx,
                        &Item::Device {
                            index: *index,
                            desc,
                        },
                    )
                }
                _ => out(*ctx, item),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let items = vec![
            (
                3,
                Item::Device {
                    index: 2,
                    desc: DeviceDesc {
                        owner: 1,
                        group: 7,
                        ranges_apart: true,
                    },
                },
            ),
            (
                3,
                Item::Buffer {
                    id: 5,
                    size: 64,
                    initial: Some(Location::Host),
                },
            ),
            (
                3,
                Item::Buffer {
                    id: 6,
                    size: 8,
                    initial: None,
                },
            ),
            (
                3,
                Item::Attach {
                    buffer: 5,
                    device: 2,
                },
            ),
            (
                3,
                Item::Command(Command {
                    command_type: 0x11F5,
                    device: 2,
                    at: At::Device,
                    stream: 9,
                    work: Work::Vendor,
                    fills_host: Some(16),
                    blocking: true,
                    waits: vec![0, 2],
                    accesses: vec![
                        Access {
                            buffer: 5,
                            range: 0..16,
                            mode: Mode::Read,
                            aliased: false,
                            pass_through: false,
                        },
                        Access {
                            buffer: 6,
                            range: 2..4,
                            mode: Mode::ReadWrite,
                            aliased: false,
                            pass_through: false,
                        },
                    ],
                }),
            ),
            (
                4,
                Item::Command(Command {
                    command_type: 0x11FB,
                    device: 0,
                    at: At::Host,
                    stream: 1,
                    work: Work::Host,
                    fills_host: None,
                    blocking: false,
                    waits: vec![],
                    accesses: vec![],
                }),
            ),
            (
                3,
                Item::HostWrote {
                    buffer: 5,
                    range: 0..8,
                },
            ),
            (3, Item::Release { buffer: 5 }),
        ];
        let mut text = String::from("# mirrorcl-record 1\nranks 2 1\n");
        for (c, i) in &items {
            text.push_str(&line(*c, i));
            text.push('\n');
        }
        let rec = parse(&text).expect("parses");
        assert_eq!((rec.ranks, rec.rank), (2, 1));
        assert_eq!(rec.items, items);
        assert!(parse("ranks 1 0\ncommand 0 1 2 device").is_err());
        assert!(parse("device 0 1 2 3").is_err(), "no header");
    }
}
