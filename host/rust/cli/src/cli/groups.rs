//! `gak groups …`: per-group limits on live claims, through the component's
//! `set-group-limit`, `get-group` and `list-groups` calls.
use super::args::{GroupLimitArgs, Groups};
use super::failure::{Failure, Outcome};
use super::output::{self, Style};
use super::store::{self, Create};

/// Run one `groups` command.
pub fn run(command: Groups) -> Outcome {
    match command {
        Groups::Show { target, group } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let info = kernel
                .taskboard()
                .get_group(&group)
                .map_err(Failure::on(&kernel, format!("group {group}")))?;
            show(&style, &group, Some(info.limit), Some(info.live));
            Ok(())
        }
        Groups::List {
            target,
            limit,
            after,
        } => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            let page = kernel
                .taskboard()
                .list_groups(after.as_deref(), limit)
                .map_err(Failure::on(&kernel, "the groups"))?;
            style.print_page(
                || output::group_page_json(&page),
                || output::group_rows(&page.items),
                page.next.as_deref(),
            );
            Ok(())
        }
        Groups::Limit(GroupLimitArgs {
            target,
            group,
            limit,
            remove,
        }) => {
            let style = Style::detect(target.json);
            let kernel = store::open(&target.store, Create::Refused)?;
            // clap demands exactly one of LIMIT and --remove.
            let limit = if remove { None } else { limit };
            kernel
                .taskboard()
                .set_group_limit(&group, limit)
                .map_err(Failure::on(&kernel, format!("group {group}")))?;
            match limit {
                Some(limit) => {
                    // Best effort: the limit is committed; a failed read
                    // only loses the live count.
                    let live = kernel.taskboard().get_group(&group).ok().map(|i| i.live);
                    show(&style, &group, Some(limit), live);
                }
                None if style.json => show(&style, &group, None, None),
                None => println!("removed the limit of group {}", output::printable(&group)),
            }
            Ok(())
        }
    }
}

/// A group: `limit` absent once removed, `live` absent when unknown.
fn show(style: &Style, group: &str, limit: Option<u32>, live: Option<u32>) {
    if style.json {
        style.print_json(&output::group_json(group, limit, live));
    } else {
        print!("{}", output::group_fields(group, limit, live));
    }
}
