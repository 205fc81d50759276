//! I7 under contention: 100 concurrent clients claim the same name with different
//! memories, then the same memory under different names, 200 times over. Each round
//! has exactly one winner, nothing of a loser's claim is left behind (the operator
//! sees exactly the winner's lease), and the fencing tokens of the contested name and
//! of the contested memory strictly increase from round to round. On PostgreSQL, the
//! same with the contenders split between two instances.

use futures::future::join_all;
use switchboard_tests::key;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{AcquireLease, Lease, MemoryId, RegisterMemory, ReleaseLease};
use switchboard_tests::{Options, TestServer};

const CONTENDERS: usize = 100;
const ROUNDS: usize = 200;

/// The claims at once, dealt to `clients` in turn.
async fn contend(clients: &[Client], claims: Vec<(String, MemoryId)>) -> Lease {
    let attempts = claims.into_iter().enumerate().map(|(i, (name, memory))| {
        let client = clients[i % clients.len()].clone();
        async move {
            let ask = AcquireLease {
                name,
                display_name: None,
                memory_instance_id: memory,
                ttl_seconds: 60.0,
                owner_client: None,
                lock_delay_seconds: None,
            };
            client.acquire_lease(&ask, &key()).await.map(|(l, _)| l)
        }
    });
    let mut winners = Vec::new();
    for result in join_all(attempts).await {
        match result {
            Ok(lease) => winners.push(lease),
            Err(e) => {
                let code = e.problem().and_then(|p| p.code.clone());
                assert_eq!(code.as_deref(), Some("lease_held"), "a loser is told: {e}");
            }
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner: {winners:?}");
    winners.remove(0)
}

async fn only_lease_is(op: &Client, winner: &Lease) {
    let leases = op.ops_leases().await.expect("leases").leases;
    assert_eq!(leases.len(), 1, "no partial claim is left: {leases:?}");
    assert_eq!(&leases[0].lease, winner);
}

async fn release(client: &Client, lease: &Lease) {
    client
        .release_lease(&ReleaseLease::of(lease))
        .await
        .expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_of_100_concurrent_claims_wins_every_round_and_tokens_only_grow() {
    let server = TestServer::start().await;
    let (_, agent) = server.agent("racer").await;
    let op = server.operator();
    let register = || async {
        agent
            .register_memory(&RegisterMemory::default())
            .await
            .expect("memory")
            .memory_instance_id
    };
    let memories: Vec<MemoryId> = join_all((0..CONTENDERS).map(|_| register())).await;
    let shared = register().await;
    let names: Vec<String> = (0..CONTENDERS).map(|i| format!("racer-{i}")).collect();

    let (mut name_token, mut memory_token) = (0, 0);
    for round in 0..ROUNDS {
        // One name, a hundred memories.
        let claims = memories
            .iter()
            .map(|m| ("contested".to_owned(), *m))
            .collect();
        let won = contend(std::slice::from_ref(&agent), claims).await;
        assert!(
            won.fencing_token > name_token,
            "round {round}: the name's token {} after {name_token}",
            won.fencing_token
        );
        name_token = won.fencing_token;
        only_lease_is(&op, &won).await;
        release(&agent, &won).await;

        // One memory, a hundred names.
        let claims = names.iter().map(|n| (n.clone(), shared)).collect();
        let won = contend(std::slice::from_ref(&agent), claims).await;
        assert!(
            won.fencing_token > memory_token,
            "round {round}: the memory's token {} after {memory_token}",
            won.fencing_token
        );
        memory_token = won.fencing_token;
        only_lease_is(&op, &won).await;
        release(&agent, &won).await;
    }
    assert_eq!(
        name_token, ROUNDS as u64,
        "one acquisition per round, no gaps"
    );
    assert_eq!(memory_token, ROUNDS as u64);
}

/// Two instances on one PostgreSQL database, their clients racing each round for a
/// name that never had a lease (so no fence row exists to lock until a claim makes
/// one), each with a memory of its own: one winner, with the first token.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server: cargo xtask test runs it on PostgreSQL and MariaDB"]
async fn two_instances_racing_for_a_new_name_have_one_winner() {
    assert!(
        switchboard_tests::Backend::current().shared(),
        "set SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL to run this test"
    );
    let a = TestServer::start().await;
    let b = a.another_instance(Options::default()).await;
    let (created, on_a) = a.agent("racer").await;
    let on_b = Client::new(&b.url, created.token.as_str()).expect("client");
    let clients = [on_a.clone(), on_b];
    let op = a.operator();
    for round in 0..50 {
        let memories = join_all((0..20).map(|_| async {
            on_a.register_memory(&RegisterMemory::default())
                .await
                .expect("memory")
                .memory_instance_id
        }))
        .await;
        let name = format!("fresh-{round}");
        let claims = memories.iter().map(|m| (name.clone(), *m)).collect();
        let won = contend(&clients, claims).await;
        assert_eq!(
            won.fencing_token, 1,
            "round {round}: a new name, a new memory"
        );
        only_lease_is(&op, &won).await;
        release(&on_a, &won).await;
    }
    b.stop().await;
    a.stop().await;
}
