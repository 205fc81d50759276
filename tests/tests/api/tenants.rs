//! Tenants: the deployment admin (the token `serve` writes, scope `admin`) creates
//! them; each tenant's operator sees and works its own tenant only.

use serde_json::json;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{CreateAgent, TenantCreated, TenantSummary};
use switchboard_tests::sdk::reqwest::Method;

use crate::support::{call, send};

fn create(
    admin: &Client,
    body: serde_json::Value,
) -> switchboard_tests::sdk::reqwest::RequestBuilder {
    admin.request(Method::POST, "admin/tenants").json(&body)
}

#[tokio::test]
async fn the_admin_creates_a_tenant_whose_operator_works_only_there() {
    let server = TestServer::start().await;
    let admin = server.operator();
    let (_, _) = server.agent("alice").await;

    let reply = call(create(&admin, json!({"name": "team-b"}))).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let created: TenantCreated = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(created.name, "team-b");
    assert!(created.operator_token.starts_with("sb_op_"));
    assert_eq!(
        reply.header("cache-control"),
        Some("no-store"),
        "an answer with a secret is never cached"
    );
    let op_b = Client::new(&server.url, created.operator_token.as_str()).unwrap();

    // Its operator creates an agent with a name the default tenant uses too, sends to
    // it, and sees only its own tenant.
    op_b.create_agent(&CreateAgent {
        name: "alice".to_owned(),
    })
    .await
    .expect("names are per tenant");
    send(&op_b, "alice", json!("for team b")).await;
    let b_agents = op_b.agents().await.unwrap();
    assert_eq!(b_agents.len(), 1);
    let a_agents = admin.agents().await.unwrap();
    assert_eq!(a_agents.len(), 1);
    assert_ne!(b_agents[0].agent_id, a_agents[0].agent_id);
    assert_eq!(
        (a_agents[0].counts.pending, b_agents[0].counts.pending),
        (0, 1)
    );

    // The admin lists every tenant with its agents, by name.
    let listed: Vec<TenantSummary> = admin.tenants().await.unwrap();
    let names: Vec<(&str, u64)> = listed.iter().map(|t| (t.name.as_str(), t.agents)).collect();
    assert_eq!(names, [("default", 1), ("team-b", 1)]);
    assert_eq!(listed[1].tenant_id, created.tenant_id);

    // A tenant's operator is not the admin, and neither is an agent.
    let (_, agent) = server.agent("bob").await;
    for client in [&op_b, &agent] {
        let doc = call(client.request(Method::GET, "admin/tenants"))
            .await
            .problem(403, "forbidden");
        assert!(
            doc["detail"]
                .as_str()
                .unwrap()
                .contains("switchboard serve"),
            "says whose token it takes: {doc}"
        );
        call(create(client, json!({"name": "team-c"})))
            .await
            .problem(403, "forbidden");
    }
    assert_eq!(
        admin.tenants().await.unwrap().len(),
        2,
        "team-c was not made"
    );
}

#[tokio::test]
async fn tenant_names_are_checked_and_unique() {
    let server = TestServer::start().await;
    let admin = server.operator();
    server.tenant("team-b").await;
    let taken = call(create(&admin, json!({"name": "team-b"}))).await;
    let doc = taken.problem(409, "conflict");
    assert!(
        doc["detail"]
            .as_str()
            .unwrap()
            .contains("pick another name"),
        "{doc}"
    );
    call(create(&admin, json!({"name": "default"})))
        .await
        .problem(409, "conflict");
    for bad in ["", "has space", "ünïcode", &"x".repeat(65)] {
        let reply = call(create(&admin, json!({"name": bad}))).await;
        assert_eq!(reply.status, 422, "{bad:?}: {}", reply.text());
    }
    let unknown_field = call(create(&admin, json!({"name": "ok", "plan": "gold"}))).await;
    assert!(
        unknown_field.status == 400 || unknown_field.status == 422,
        "{}",
        unknown_field.text()
    );
    let names: Vec<String> = admin
        .tenants()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["default", "team-b"], "nothing bad was created");
}

/// Many admins' requests for one name at once (on every backend, where the unique
/// index decides between connections): one 201, the rest 409, one tenant, and only
/// the winner's token works.
#[tokio::test]
async fn racing_creators_of_one_name_make_one_tenant() {
    let server = TestServer::start().await;
    let admin = server.operator();
    let replies = futures::future::join_all(
        (0..8).map(|_| call(create(&admin, json!({"name": "contested"})))),
    )
    .await;
    let won: Vec<_> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        won.len(),
        1,
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for lost in replies.iter().filter(|r| r.status != 201) {
        lost.problem(409, "conflict");
    }
    let listed = admin.tenants().await.unwrap();
    assert_eq!(listed.iter().filter(|t| t.name == "contested").count(), 1);
    let token = won[0].json()["operator_token"].as_str().unwrap().to_owned();
    let op = Client::new(&server.url, token.as_str()).unwrap();
    assert!(op.agents().await.unwrap().is_empty());
}

/// A token file written before the `admin` scope existed: the next start gives its
/// token the admin's scopes, and the same token then creates tenants.
#[tokio::test]
async fn an_older_operator_token_becomes_the_admins_at_the_next_start() {
    let mut server = TestServer::start().await;
    server
        .seed(
            "UPDATE tokens SET scopes = 'ops:read ops:write messages:send metrics:read' \
             WHERE label = 'operator'",
        )
        .await;
    let admin = server.operator();
    call(admin.request(Method::GET, "admin/tenants"))
        .await
        .problem(403, "forbidden");
    server.outage(std::time::Duration::ZERO).await;
    let admin = server.operator();
    let listed = admin
        .tenants()
        .await
        .expect("the same token is the admin's now");
    assert_eq!(listed.len(), 1);
    assert!(
        admin.agents().await.is_ok(),
        "and still the default tenant's operator"
    );
}
