//! Two stacks side by side, as docs/deploy.md recommends (a second stack over the same
//! tables, `ExistingTables=true`): every name a resource gives itself is its stack's own,
//! the tables' (and their scaling's) alone shared, since most names are unique per
//! account and Region and a shared one fails the second stack's create (the status bus
//! did). And the queues that hold events are kept, not deleted, when an update replaces
//! them.

use std::collections::BTreeSet;

use serde_json::Value;
use stm_deploytest::template::{referenced, Resolver, Template};

use crate::support::prop;

/// Where a resource type keeps the physical name it gives itself.
#[derive(Clone, Copy, Debug)]
enum Naming {
    /// No name of its own (CloudFormation or the service identifies it otherwise).
    Unnamed,
    /// In this property; without it CloudFormation generates a unique name.
    Optional(&'static str),
    /// In this property; without it SAM names it by its logical id, the same in every
    /// stack.
    LogicalIdByDefault(&'static str),
    /// In this property, evaluated from the tables' names: shared on purpose.
    Shared(&'static str),
}

/// How `ty` is named. `None` for a type this test does not know yet: a new kind of
/// resource makes the test fail until someone decides how it is named.
fn naming(ty: &str) -> Option<Naming> {
    Some(match ty {
        "AWS::DynamoDB::Table" => Naming::Shared("TableName"),
        // a target is known by its table's (or index's) ResourceId, and a policy's name is
        // unique only within its target: both as shared as the tables
        "AWS::ApplicationAutoScaling::ScalableTarget" => Naming::Shared("ResourceId"),
        "AWS::ApplicationAutoScaling::ScalingPolicy" => Naming::Shared("PolicyName"),
        "AWS::SQS::Queue" => Naming::Optional("QueueName"),
        "AWS::SQS::QueuePolicy" => Naming::Unnamed,
        // `Name` is required on a bus (checked below)
        "AWS::Events::EventBus" => Naming::Optional("Name"),
        "AWS::Events::Rule" => Naming::Optional("Name"),
        "AWS::Logs::LogGroup" => Naming::Optional("LogGroupName"),
        "AWS::CloudWatch::Alarm" => Naming::Optional("AlarmName"),
        "AWS::IAM::Role" => Naming::Optional("RoleName"),
        "AWS::IAM::ManagedPolicy" => Naming::Optional("ManagedPolicyName"),
        "AWS::Serverless::Function" => Naming::Optional("FunctionName"),
        // SAM: "LayerName ... if not specified, the logical id" (its translator does
        // `if not self.LayerName: self.LayerName = old_logical_id`)
        "AWS::Serverless::LayerVersion" => Naming::LogicalIdByDefault("LayerName"),
        _ => return None,
    })
}

/// How a SAM function event of type `ty` names what SAM makes of it.
fn event_naming(ty: &str) -> Option<Naming> {
    Some(match ty {
        // an EventBridge rule (or schedule), named by `Name` or by CloudFormation
        "Schedule" | "ScheduleV2" => Naming::Optional("Name"),
        // an event source mapping: no name
        "SQS" => Naming::Unnamed,
        _ => return None,
    })
}

/// One name the template gives: where (`Id.Property`, or `Id.Events.E.Property`), how,
/// its definition (`None`: the property is absent), and the logical id SAM would use.
struct Named<'a> {
    label: String,
    naming: Naming,
    value: Option<&'a Value>,
    logical_id: String,
}

/// The name `naming` keeps in `parent` (a resource's or an event's `Properties`), if it
/// has one.
fn named<'a>(label: &str, naming: Naming, parent: &'a Value, logical_id: &str) -> Option<Named<'a>> {
    let property = match naming {
        Naming::Unnamed => return None,
        Naming::Optional(p) | Naming::LogicalIdByDefault(p) | Naming::Shared(p) => p,
    };
    Some(Named {
        label: format!("{label}.{property}"),
        naming,
        value: parent.get(property).filter(|v| !v.is_null()),
        logical_id: logical_id.to_string(),
    })
}

/// Every name the template's resources (and their SAM events) can give themselves.
fn names(t: &Template) -> Vec<Named<'_>> {
    let mut out = Vec::new();
    for (id, resource) in t.resources() {
        let ty = resource["Type"].as_str().unwrap_or_default();
        let naming = naming(ty).unwrap_or_else(|| {
            panic!("{id} is a {ty}, which this test does not know: add how it is named to naming()")
        });
        let props = &resource["Properties"];
        out.extend(named(id, naming, props, id));
        if ty == "AWS::Serverless::Function" {
            for (event, e) in props["Events"].as_object().into_iter().flatten() {
                let ety = e["Type"].as_str().unwrap_or_default();
                let naming = event_naming(ety).unwrap_or_else(|| {
                    panic!(
                        "{id}.Events.{event} is a {ety} event, which this test does not know: \
                         add it to event_naming()"
                    )
                });
                out.extend(named(
                    &format!("{id}.Events.{event}"),
                    naming,
                    &e["Properties"],
                    id,
                ));
            }
        }
    }
    out
}

/// Every conditional resource created: the status events' example (StatusEvents), the
/// tables' scaling (provisioned, with the tables).
const EVERYTHING: [(&str, &str); 3] = [
    ("StatusEvents", "all"),
    ("CapacityMode", "provisioned"),
    ("ExistingTables", "false"),
];

/// The template as stack `name` with id `uuid` would evaluate it, every other resource's
/// `Ref` a placeholder and the tables' their names.
fn stack<'a>(t: &'a Template, name: &str, uuid: &str) -> Resolver<'a> {
    Resolver {
        stack_name: name.into(),
        stack_uuid: uuid.into(),
        ..Resolver::new(t, &EVERYTHING)
    }
    .with_placeholders()
    .with_table_refs()
}

/// The name `n` gives itself in stack `r`: `None` when CloudFormation generates it.
fn evaluate(n: &Named, r: &Resolver) -> Option<String> {
    match (n.value, n.naming) {
        (Some(v), _) => Some(r.string(v).unwrap_or_else(|e| panic!("{}: {e:#}", n.label))),
        (None, Naming::LogicalIdByDefault(_)) => Some(n.logical_id.clone()),
        (None, _) => None,
    }
}

/// The names (of those `only` keeps, the tables' aside) that stacks `a` and `b` both
/// give: each as `Label is "name" in both stacks`.
fn shared_between(t: &Template, a: &Resolver, b: &Resolver, only: impl Fn(&Named) -> bool) -> Vec<String> {
    names(t)
        .iter()
        .filter(|n| !matches!(n.naming, Naming::Shared(_)) && only(n))
        .filter_map(|n| {
            let (x, y) = (evaluate(n, a), evaluate(n, b));
            match (x, y) {
                (Some(x), Some(y)) if x == y => Some(format!("{} is {x:?} in both stacks", n.label)),
                _ => None,
            }
        })
        .collect()
}

/// Two stacks in one account and Region, with one Prefix (over the same tables): every
/// name a resource gives itself differs between them, but the tables' (and their
/// scaling's), which are the same tables.
#[test]
fn two_stacks_over_one_prefix_share_no_name_but_the_tables() {
    let t = Template::repo();
    let a = stack(&t, "stm-orders", "51af3dc0-da77-11e4-872e-1234567db123");
    let b = stack(&t, "stm-orders-canary", "0b5e5a70-1f0d-11ef-9d2b-0a58a9feac02");
    let clashes = shared_between(&t, &a, &b, |_| true);
    assert!(
        clashes.is_empty(),
        "names a second stack would fail to create (unique per account and Region), or \
         would share with the first:\n  {}",
        clashes.join("\n  ")
    );
    // the tables are the same ones, by design (the Prefix's)
    for n in names(&t).iter().filter(|n| matches!(n.naming, Naming::Shared(_))) {
        assert_eq!(
            evaluate(n, &a),
            evaluate(n, &b),
            "{}: named by the tables, the same in both stacks",
            n.label
        );
    }
    // what the test must have looked at: each name the stack gives itself today (a
    // rename that drops one from the scan fails here, not silently)
    let checked: BTreeSet<String> = names(&t)
        .iter()
        .filter(|n| !matches!(n.naming, Naming::Shared(_)) && evaluate(n, &a).is_some())
        .map(|n| n.label.clone())
        .collect();
    for label in [
        "StatusBus.Name",
        "EventQueue.QueueName",
        "DeadLetterQueue.QueueName",
        "TimerQueue.QueueName",
        "WorkerLogGroup.LogGroupName",
        "RelayLogGroup.LogGroupName",
        "SweeperLogGroup.LogGroupName",
        "DefinitionsLayer.LayerName",
    ] {
        assert!(checked.contains(label), "{label} was not checked: {checked:?}");
    }
    // a bus has no generated name (CloudFormation requires `Name`), so each must carry
    // its stack's, which the comparison above checked
    for bus in t.of_type("AWS::Events::EventBus") {
        assert!(!prop(&t, &bus, "Name").is_null(), "{bus} has a Name");
    }
}

/// What a stack keeps after it is gone (DeletionPolicy or UpdateReplacePolicy Retain)
/// must not be in the way of a stack created later under the same name: a retained name
/// differs between two stacks that share a stack name but not an id.
#[test]
fn what_a_stack_retains_does_not_block_its_successor_of_the_same_name() {
    let t = Template::repo();
    let first = stack(&t, "stm-orders", "51af3dc0-da77-11e4-872e-1234567db123");
    let again = stack(&t, "stm-orders", "0b5e5a70-1f0d-11ef-9d2b-0a58a9feac02");
    let retained = |n: &Named| {
        let r = &t.resources()[&n.logical_id];
        !n.label.contains(".Events.")
            && (r["DeletionPolicy"] == "Retain" || r["UpdateReplacePolicy"] == "Retain")
    };
    let clashes = shared_between(&t, &first, &again, retained);
    assert!(
        clashes.is_empty(),
        "a retained resource's name is the stack name's, so a new stack of that name would \
         fail to create it:\n  {}",
        clashes.join("\n  ")
    );
}

/// The event queue (the worker's SQS source), its dead-letter queue and the timer queue
/// (the sweeper's doorbell source) are kept when an update replaces them: a new queue
/// starts empty, and CloudFormation deletes the replaced one by default, messages and
/// all. The event queue and its dead-letter queue are also kept when the stack is
/// deleted, as the tables their events belong to are.
#[test]
fn the_queues_that_hold_events_are_kept_when_replaced() {
    let t = Template::repo();
    let source = |function: &str| -> String {
        let events = prop(&t, function, "Events")
            .as_object()
            .unwrap_or_else(|| panic!("{function}.Events"));
        let sqs: Vec<String> = events
            .values()
            .filter(|e| e["Type"] == "SQS")
            .filter_map(|e| referenced(&e["Properties"]["Queue"]))
            .collect();
        assert_eq!(sqs.len(), 1, "{function}: one SQS source, a template queue");
        sqs[0].clone()
    };
    let events = source("Worker");
    let timers = source("Sweeper");
    let dead_letters = referenced(&prop(&t, &events, "RedrivePolicy")["deadLetterTargetArn"])
        .expect("the event queue's dead-letter queue is a template queue");
    for id in [&events, &dead_letters, &timers] {
        let r = t.resource(id).expect("queue");
        assert_eq!(r["UpdateReplacePolicy"], "Retain", "{id}: UpdateReplacePolicy");
        // cfn-lint W3011: one policy set asks for the other, explicitly
        assert!(r["DeletionPolicy"].is_string(), "{id}: DeletionPolicy set too");
    }
    for id in [&events, &dead_letters] {
        assert_eq!(
            t.resource(id).expect("queue")["DeletionPolicy"],
            "Retain",
            "{id}: kept when the stack is deleted"
        );
    }
}

/// The bus's and the layer's names, built like the queues' from the Prefix and the stack
/// id, fit their services' rules whatever the stack is called: a custom bus name has 1 to
/// 256 of `[.-_A-Za-z0-9]` and is not `default` (EventBridge `CreateEventBus`), a layer
/// name 1 to 140 of `[a-zA-Z0-9-_]` (Lambda `PublishLayerVersion`).
#[test]
fn the_bus_and_layer_names_fit_whatever_the_stack_name() {
    let t = Template::repo();
    let prefix = "p".repeat(30); // the longest Prefix allows
    let longest = Resolver {
        stack_name: format!("s{}", "-x".repeat(63) + "y"), // 128 characters, the most
        ..Resolver::new(&t, &[("Prefix", &prefix)])
    };
    assert_eq!(longest.stack_name.len(), 128);
    fn bus_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || ".-_".contains(c)
    }
    fn layer_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || "-_".contains(c)
    }
    // (type, the name's property, its most characters, the characters it allows)
    let rules = [
        ("AWS::Events::EventBus", "Name", 256, bus_char as fn(char) -> bool),
        ("AWS::Serverless::LayerVersion", "LayerName", 140, layer_char),
    ];
    for (ty, property, most, allowed) in rules {
        let ids = t.of_type(ty);
        assert!(!ids.is_empty(), "template.yaml has a {ty}");
        for id in ids {
            let name = longest
                .string(prop(&t, &id, property))
                .unwrap_or_else(|e| panic!("{id}.{property}: {e:#}"));
            assert!(
                (1..=most).contains(&name.len()),
                "{id}: {name:?} has {} characters, at most {most} allowed",
                name.len()
            );
            assert!(
                name.chars().all(allowed),
                "{id}: {name:?} has a character {ty} refuses"
            );
            assert_ne!(name, "default", "{id}: `default` is the account's own bus");
            assert!(
                name.starts_with(&format!("{prefix}-")),
                "{id}: {name:?} starts with the Prefix"
            );
        }
    }
}
