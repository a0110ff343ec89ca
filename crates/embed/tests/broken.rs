//! A model folder whose files are damaged is an error naming the file, never a panic and never a
//! vector of NaNs: weights cut short, a configuration that does not fit the weights, weights
//! that hold NaN. Each case is a copy of the installed model's folder with one file changed.

use std::path::{Path, PathBuf};

use agent_memory_embed::{EmbedError, Model, Options};

fn model_dir() -> PathBuf {
    if let Ok(d) = std::env::var("AGENT_MEMORY_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let out = std::process::Command::new("pg_config").arg("--sharedir").output().expect("pg_config --sharedir");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("agent_memory/models/all-MiniLM-L6-v2")
}

/// A copy of the model's folder under the temporary folder, named `name`.
fn copy(name: &str) -> PathBuf {
    let from = model_dir();
    let to = std::env::temp_dir().join(format!("agent_memory_broken_{}_{name}", std::process::id()));
    std::fs::create_dir_all(&to).unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
    to
}

fn broken(dir: &Path) -> String {
    broken_with(dir, Options::default())
}

fn broken_with(dir: &Path, options: Options) -> String {
    match Model::load(dir, options) {
        Err(EmbedError::Broken(p, why)) => format!("{}: {why}", p.display()),
        Err(e) => panic!("expected a broken file, got {e}"),
        Ok(m) => match m.embed::<EmbedError>(&["a text"], || Ok(())) {
            Err(EmbedError::Broken(p, why)) => format!("{}: {why}", p.display()),
            other => panic!("expected a broken file, got {:?}", other.map(|v| v[0][..3].to_vec())),
        },
    }
}

#[test]
fn weights_cut_short_are_a_broken_file() {
    let dir = copy("short");
    let w = dir.join("model.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap();
    assert!(broken(&dir).contains("model.safetensors"));
}

#[test]
fn a_configuration_that_does_not_fit_the_weights_is_a_broken_file() {
    let dir = copy("config");
    let c = dir.join("config.json");
    let original = std::fs::read_to_string(&c).unwrap();
    // 372 heads' worth of dimensions (12 × 31) that the weights do not have: the weights' file.
    let text = original.replace("\"hidden_size\": 384", "\"hidden_size\": 372");
    assert!(text.contains("\"hidden_size\": 372"), "the configuration names its hidden size");
    std::fs::write(&c, text).unwrap();
    let why = broken(&dir);
    assert!(why.contains("model.safetensors") && why.contains("372"), "{why}");
    // A size no head count divides cannot be a model at all: the configuration is named.
    std::fs::write(&c, original.replace("\"hidden_size\": 384", "\"hidden_size\": 100")).unwrap();
    let why = broken(&dir);
    assert!(why.contains("config.json") && why.contains("num_attention_heads"), "{why}");
}

#[test]
fn weights_that_hold_nan_are_a_broken_file_not_a_vector() {
    let dir = copy("nan");
    let w = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&w).unwrap();
    let (header, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let (name, info) = meta.tensors().into_iter().find(|(k, _)| k.ends_with("attention.self.query.weight")).unwrap();
    assert_eq!(info.dtype, safetensors::Dtype::F32, "{name}");
    let (start, end) = (8 + header + info.data_offsets.0, 8 + header + info.data_offsets.1);
    for b in bytes[start..end].chunks_exact_mut(4) {
        b.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&w, bytes).unwrap();
    let why = broken(&dir);
    assert!(why.contains("not finite"), "{why}");
    // The 8-bit path too, on every kernel this CPU runs.
    for kernel in agent_memory_embed::q8::Kernel::available() {
        let why = broken_with(&dir, Options { kernel: Some(kernel), ..Options::default() });
        assert!(why.contains("not finite") && why.contains("model.safetensors"), "{} kernel: {why}", kernel.name());
    }
}
