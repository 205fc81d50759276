//! National ids and bank accounts through the whole gate: one test per kind of
//! number, each with valid vectors (found, with the span of the number) and the same
//! vectors with a wrong check character (not found), then benign look-alikes that
//! must pass. The vectors were computed with an independent implementation
//! (python-stdnum where it covers the kind, the published rule otherwise).

use std::ops::Range;

use serde_json::json;

use super::super::*;

fn gate() -> Gate {
    Gate::new().schema(Schema::new("note").field("body", FieldKind::Text))
}

/// Every finding in `text`, as (rule, span).
fn found(text: &str) -> Vec<(Rule, Range<usize>)> {
    match gate().check("note", json!({ "body": text })) {
        Ok(_) => Vec::new(),
        Err(blocked) => blocked
            .findings()
            .map(|f| (f.rule, f.span.clone()))
            .collect(),
    }
}

/// Each sample, put in a sentence, is found as `kind` over its own span, and
/// nothing else is found. Another rule may name the same span: a South African ID
/// number is Luhn-valid, so one that starts with 2–6 is also card-shaped.
fn assert_found(kind: PiiKind, samples: &[&str]) {
    for sample in samples {
        let text = format!("see {sample}, thanks");
        let span = 4..4 + sample.len();
        let found = found(&text);
        assert!(
            found.contains(&(Rule::Pii(kind), span.clone())),
            "{sample:?} should be found as {kind:?}: {found:?}"
        );
        assert!(
            found.iter().all(|(_, s)| *s == span),
            "{sample:?}: {found:?}"
        );
    }
}

/// Each sample, alone and in a sentence, passes the gate.
fn assert_passes(samples: &[&str]) {
    for sample in samples {
        for text in [sample.to_string(), format!("see {sample}, thanks")] {
            assert_eq!(found(&text), [], "{text:?} should pass");
        }
    }
}

#[test]
fn lower_case_ibans_are_found() {
    assert_found(
        PiiKind::Iban,
        &[
            "de89 3704 0044 0532 0130 00",
            "gb82west12345698765432",
            "de89146259835567225275",
            "gb34 lskg 9159 7726 3827 39",
            "fr50 4325 6681 08pu fusw 9bnq s88",
            "nl28hkbg2288274653",
        ],
    );
    assert_passes(&[
        "de90146259835567225275",      // wrong check digits
        "gb35lskg91597726382739",      // wrong check digits
        "fr514325668108pufusw9bnqs88", // wrong check digits
        "nl29hkbg2288274653",          // wrong check digits
        "Gb82West12345698765432",      // mixed case: a random id, not an IBAN
        "be71570232010b84",            // check holds, but BE has 12 digits, not hex
    ]);
}

#[test]
fn nhs_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "943 476 5919",
            "355 218 5054",
            "651 606 1130",
            "026 584 1216",
            "345 311 3543",
            "026-584-1216", // dashed, not a North American phone shape
        ],
    );
    // Bare ten digits only after the label.
    assert_eq!(
        found("NHS number: 9434765919"),
        [(Rule::Pii(PiiKind::NationalId), 12..22)]
    );
    assert_eq!(
        found("nhs_no=4010232137"),
        [(Rule::Pii(PiiKind::NationalId), 7..17)]
    );
    assert_passes(&[
        "943 476 5918", // wrong check digit
        "355 218 5050",
        "651 606 1131",
        "026 584 1210",
        "345 311 3540",
        "9434765919",  // bare and unlabelled: timestamps and ids look like this
        "943 4765919", // not the 3-3-4 grouping
    ]);
}

#[test]
fn aadhaar_numbers_without_spaces_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "234567890124",
            "454524100783",
            "907065929704",
            "738008007381",
            "441283530044",
        ],
    );
    assert_passes(&[
        "234567890123", // wrong Verhoeff digit
        "454524100780",
        "907065929700",
        "738008007380",
        "441283530040",
        "134567890124", // starts with 1
    ]);
}

#[test]
fn italian_fiscal_codes_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "RSSMRA85T10A562S",
            "SPPFLV33A62B681C",
            "PBLDVV62E12B455Y",
            "CMMSRM12P54G909K",
            "TRZNGR86T15B803X",
        ],
    );
    assert_passes(&[
        "RSSMRA85T10A562T",
        "SPPFLV33A62B681A",
        "PBLDVV62E12B455A",
        "CMMSRM12P54G909A",
        "TRZNGR86T15B803A",
    ]);
}

#[test]
fn finnish_identity_codes_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "131052-308T",
            "101158-810D",
            "140586-4902",
            "241119A875F",
            "030537-8298",
        ],
    );
    assert_passes(&[
        "131052-308U",
        "101158-8100",
        "140586-4900",
        "241119A8750",
        "030537-8290",
        "310252-308Y", // 31 February
    ]);
}

#[test]
fn polish_pesel_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "44051401359",
            "89072741941",
            "78060231047",
            "40042227876",
            "44090867677",
        ],
    );
    assert_passes(&[
        "44051401358",
        "89072741940",
        "78060231040",
        "40042227870",
        "44090867670",
    ]);
}

#[test]
fn turkish_identity_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "10000000146",
            "31415387530",
            "66164939228",
            "87474129888",
            "30756888072",
        ],
    );
    assert_passes(&[
        "10000000147",
        "31415387531",
        "66164939220",
        "87474129880",
        "30756888070",
    ]);
}

#[test]
fn swedish_personal_identity_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "811218-9876",
            "770613-1658",
            "730828-9672",
            "590814-1244",
            "310719-6135",
        ],
    );
    assert_passes(&[
        "811218-9877",
        "770613-1650",
        "730828-9670",
        "590814-1240",
        "310719-6130",
    ]);
}

#[test]
fn south_african_id_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "8001015009087",
            "5402065770185",
            "8912256572189",
            "5901169403080",
            "6112125835188",
        ],
    );
    assert_passes(&[
        "8001015009088",
        "5402065770180",
        "8912256572180",
        "5901169403081",
        "6112125835180",
    ]);
}

#[test]
fn singapore_nric_and_fin_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "S1234567D",
            "S5260181I",
            "T5908301A",
            "F6613186Q",
            "G0913909K",
            "M9603082N",
        ],
    );
    assert_passes(&[
        "S1234567A",
        "S5260181A",
        "T5908301B",
        "F6613186A",
        "G0913909A",
        "M9603082A",
    ]);
}

#[test]
fn korean_resident_registration_numbers_are_found() {
    // Since October 2020 the last six digits are random: the shape and the birth
    // date are the check. The seventh digit gives the century: 1–4 for citizens,
    // 5–8 for foreigners.
    assert_found(
        PiiKind::NationalId,
        &[
            "800101-1234567",
            "021130-4123456",
            "991231-2000001",
            "040229-7000001",
        ],
    );
    assert_passes(&[
        "801301-1234567", // month 13
        "800230-1234567", // 30 February
        "800101-9234567", // born in the 1800s
        "800101-0234567", // no such century digit
        "8001011234567",  // bare thirteen digits: millisecond timestamps look like this
    ]);
}

#[test]
fn thai_identification_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "1-0309-77484-81-3",
            "2-8514-43134-29-4",
            "2-1249-56200-72-8",
            "3-7253-32124-33-1",
        ],
    );
    assert_passes(&[
        "1-0309-77484-81-0",
        "2-8514-43134-29-0",
        "2-1249-56200-72-0",
        "3-7253-32124-33-0",
    ]);
}

#[test]
fn indian_pans_are_found() {
    assert_found(PiiKind::NationalId, &["ABCPE1234F", "BNZPM2501F"]);
    assert_passes(&[
        "ABCDE1234F", // fourth letter D: not a person's PAN
        "ABCPE12345", // ends with a digit
        "abcpe1234f", // lower case
    ]);
}

#[test]
fn australian_medicare_numbers_are_found() {
    assert_found(
        PiiKind::NationalId,
        &[
            "2123 45670 1",
            "4628 19486 3",
            "2993 51812 1",
            "6378 65797 8",
        ],
    );
    assert_passes(&[
        "2123 45671 1",
        "4628 19487 3",
        "2993 51813 1",
        "6378 65798 8",
        "7123 45670 1", // first digit 7
    ]);
}

#[test]
fn labelled_tax_file_and_social_insurance_numbers_are_found() {
    for (text, span) in [
        ("TFN: 465 122 775", 5..16),
        ("my tax file number is 105460103", 22..31),
        ("SIN 190 701 045", 4..15),
        ("social insurance number: 532-903-721", 25..36),
    ] {
        assert_eq!(
            found(text),
            [(Rule::Pii(PiiKind::NationalId), span)],
            "{text}"
        );
    }
    assert_passes(&[
        "TFN: 465 122 770", // wrong check digit
        "SIN 190 701 040",  // wrong check digit
        "465 122 775",      // valid TFN, but unlabelled: 3-3-3 groups are too common
        "190 701 045",      // valid SIN, unlabelled
    ]);
}

/// Ordinary text shaped like the numbers above; none of it may be refused.
#[test]
fn benign_look_alikes_of_national_ids_pass() {
    assert_passes(&[
        // Order, invoice, build and ticket numbers.
        "order #234567890124",
        "order 234567890124 shipped",
        "invoice INV-2026-000123",
        "build 20261129.3",
        "tracking number 428069032005",
        "PO 4500012345",
        // Cloud account ids: the most common bare twelve digits in a message.
        "AWS account 234567890124",
        "arn:aws:iam::234567890124:role/deploy",
        "234567890124.dkr.ecr.eu-west-1.amazonaws.com/app:1.4.2",
        "\"AccountId\": \"234567890124\"",
        // Timestamps and dates.
        "1732895306",
        "1732895306121",
        "ts=1796000000000",
        "2026-11-29T16:08:26Z",
        "backup-202611291608.sql",
        "snapshot 202611031601",
        "20261129160826_create_agents.sql",
        // UUIDs and hex ids, including an all-digit group.
        "0192f7c4-9a3b-7d21-8e5f-6c4b3a291807",
        "0192f7c4-9a3b-7d21-8e5f-234567890124",
        "container 4f66ad9a0b2e",
        "span be4212a45678901c",
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        // Versions and paths.
        "v1.2.3",
        "version 2026.11.29.1608",
        "1.234567890124",
        "/var/lib/switchboard/234567890124/outbox",
        "https://example.com/items/234567890124",
        // Digits that are part of something longer.
        "2345678901245",
        "4111 2345 6789 0124 5",
        "943 476 5919 7",
        // Codes shaped like a Finnish, Italian or Singapore id with the wrong check.
        "S1234567A",
        "RSSMRA85T10A562T",
        // Plain amounts and counts.
        "123 456 789",
        "1 234 567 890",
        "p99 latency 12 ms over 2345678 requests",
        "build 17 of 2147483647",
    ]);
}

#[test]
fn a_dashed_north_american_phone_is_a_phone_not_an_nhs_number() {
    // 219-555-7737 holds the NHS mod-11 check too; the phone rule takes it.
    let text = "call 219-555-7737";
    assert_eq!(found(text), [(Rule::Pii(PiiKind::Phone), 5..17)]);
}
