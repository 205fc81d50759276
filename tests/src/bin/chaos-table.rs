//! Prints the chaos table from the rows the scenarios recorded in `target/chaos/`
//! (`cargo xtask chaos` and `cargo xtask test` call it at the end).

fn main() {
    let rows = switchboard_tests::chaos::rows();
    if rows.is_empty() {
        println!("chaos: no rows recorded");
        return;
    }
    print!("{}", switchboard_tests::chaos::table(&rows));
}
