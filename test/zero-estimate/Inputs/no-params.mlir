// A module without parameters.
module {
}
