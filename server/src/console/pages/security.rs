//! `/security`: the ACLs, the SCRAM users (names, mechanisms and iterations: never a salt or a
//! key) and the client quotas, each shown only to a viewer allowed to read them as Kafka's
//! requests are: DescribeAcls and DescribeUserScramCredentials need Describe on the cluster,
//! DescribeClientQuotas DescribeConfigs on it.

use acl::{AclBindingFilter, Operation, ResourceType};

use super::{page, Context, Page};
use crate::console::html::Html;

pub fn security(context: &Context<'_>) -> Page {
    let broker = context.broker;
    let describes_cluster = context.viewer.may(
        broker,
        Operation::Describe,
        ResourceType::Cluster,
        "kafka-cluster",
    );
    let mut h = Html::default();
    h.raw("<h2>ACLs</h2>");
    let authorizer = &broker.access().authorizer;
    if !authorizer.is_enabled() {
        h.raw(
            "<p class=\"none\">No authorizer (<code>--authorizer-class-name</code>): every \
               client may do everything.</p>",
        );
    } else if !describes_cluster {
        h.raw("<p class=\"none\">Needs Describe on the cluster.</p>");
    } else {
        acls(&mut h, &authorizer.describe(&AclBindingFilter::ANY));
    }
    h.raw("<h2>SCRAM users</h2>");
    if describes_cluster {
        let users = broker.access().security.scram.describe();
        if users.is_empty() {
            h.raw("<p class=\"none\">No SCRAM credentials.</p>");
        } else {
            h.raw("<table><tr><th>User</th><th>Mechanisms</th></tr>");
            for (user, credentials) in &users {
                h.raw("<tr><td>").name(user).raw("</td><td>");
                for (i, (hash, iterations)) in credentials.iter().enumerate() {
                    if i > 0 {
                        h.raw(", ");
                    }
                    h.text(hash.mechanism_name()).raw(" (");
                    h.int(i64::from(*iterations)).raw(" iterations)");
                }
                h.raw("</td></tr>");
            }
            h.raw("</table>");
        }
    } else {
        h.raw("<p class=\"none\">Needs Describe on the cluster.</p>");
    }
    h.raw("<h2>Client quotas</h2>");
    if context.viewer.sees_cluster(broker) {
        quotas(&mut h, context);
    } else {
        h.raw("<p class=\"none\">Needs DescribeConfigs on the cluster.</p>");
    }
    Ok(page(
        context,
        "/security",
        "Security: ACLs, users and quotas",
        h,
    ))
}

fn acls(h: &mut Html, bindings: &[acl::AclBinding]) {
    if bindings.is_empty() {
        h.raw("<p class=\"none\">No ACLs.</p>");
        return;
    }
    h.raw(
        "<table><tr><th>Resource</th><th>Pattern</th><th>Name</th><th>Principal</th>\
           <th>Host</th><th>Operation</th><th>Permission</th></tr>",
    );
    for b in bindings {
        let (p, e) = (&b.pattern, &b.entry);
        h.raw("<tr><td>").text(&p.resource_type.to_string());
        h.raw("</td><td>").text(&p.pattern_type.to_string());
        h.raw("</td><td>").name(&p.name);
        h.raw("</td><td>").name(&e.principal);
        h.raw("</td><td>").name(&e.host);
        h.raw("</td><td>").text(&e.operation.to_string());
        h.raw("</td><td>").text(&e.permission.to_string());
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}

fn quotas(h: &mut Html, context: &Context<'_>) {
    let quotas = context.broker.admin().quotas.describe(&[], false);
    if quotas.is_empty() {
        h.raw("<p class=\"none\">No client quotas.</p>");
        return;
    }
    h.raw("<table><tr><th>Entity</th><th>Quotas</th></tr>");
    for (entity, values) in &quotas {
        h.raw("<tr><td>");
        for (i, (kind, name)) in entity.components().into_iter().enumerate() {
            if i > 0 {
                h.raw(", ");
            }
            h.text(kind).raw("=");
            match name {
                Some(name) => h.name(name),
                None => h.raw("&lt;default&gt;"),
            };
        }
        h.raw("</td><td>");
        for (i, (kind, value)) in values.iter().enumerate() {
            if i > 0 {
                h.raw(", ");
            }
            h.text(kind.name()).raw("=").text(&value.to_string());
        }
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}
