fn main() {
    // Bind MirrorCL's references to its own entry points locally. Without this, the
    // addresses placed in the dispatch table resolve to the ICD loader's exported
    // functions of the same names (symbol interposition), which dispatch straight back
    // through the table: an endless loop.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
}
