fn main() {
    switchboard_desktop::run();
}
