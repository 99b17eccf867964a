//! `Config`, the body of a `configure` request (docs/protocol.md §4.9), validated when it is built.

use super::catalog::{Language, Voice};

/// A voice: a member of the deprecated catalog, or a voice id string such as `omnivoice/gauri`.
///
/// A string needs the runtime's `string_config` capability; a catalog member does not.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VoiceChoice {
    /// Sent in the deprecated enum field `tts.voice` (#1).
    Catalog(Voice),
    /// Sent in `tts.voice_id` (#3).
    Id(String),
}

/// A language: a member of the deprecated catalog, or a BCP-47 tag such as `en-IN`.
///
/// A string needs the runtime's `string_config` capability; a catalog member does not.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LanguageChoice {
    /// Sent in the deprecated enum fields `tts.language` (#2) / `stt.language` (#1).
    Catalog(Language),
    /// Sent in `tts.language_tag` (#4) / `stt.language_tag` (#3).
    Tag(String),
}

impl From<Voice> for VoiceChoice {
    fn from(v: Voice) -> Self {
        VoiceChoice::Catalog(v)
    }
}
impl From<&str> for VoiceChoice {
    fn from(s: &str) -> Self {
        VoiceChoice::Id(s.to_owned())
    }
}
impl From<String> for VoiceChoice {
    fn from(s: String) -> Self {
        VoiceChoice::Id(s)
    }
}
impl From<Language> for LanguageChoice {
    fn from(l: Language) -> Self {
        LanguageChoice::Catalog(l)
    }
}
impl From<&str> for LanguageChoice {
    fn from(s: &str) -> Self {
        LanguageChoice::Tag(s.to_owned())
    }
}
impl From<String> for LanguageChoice {
    fn from(s: String) -> Self {
        LanguageChoice::Tag(s)
    }
}

/// The speech-synthesis section. Absent fields mean "leave unchanged" mid-call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TtsConfig {
    /// The voice, from the next speech unit on.
    pub voice: Option<VoiceChoice>,
    /// The spoken language, from the next speech unit on.
    pub language: Option<LanguageChoice>,
}

/// The speech-recognition section. Absent fields mean "leave unchanged" mid-call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SttConfig {
    /// The language listened for, once the open turn commits.
    pub language: Option<LanguageChoice>,
    /// How long the runtime waits before deciding the user finished: a 0..=10 scale (not ms);
    /// deployments default to 7. Takes effect immediately.
    pub patience: Option<u32>,
}

/// The idle-detection section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdleConfig {
    /// Silence before `UserIdle` fires, in ms; 0 disables idle detection. Restarts the running
    /// timer.
    pub timeout_ms: Option<u32>,
}

/// Why a [`Config`] could not be built (docs/protocol.md §4.9 "Validation when the Config is built").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Exactly one of `tts.language` and `stt.language` was set.
    #[error(
        "{set} is set but {missing} is not: a language change must name both legs (what the user \
         is heard in and what the brain speaks in), even when they are the same; set both"
    )]
    OneLanguageLeg {
        /// The leg that was set.
        set: &'static str,
        /// The leg that was not.
        missing: &'static str,
    },
    /// A voice or language string was empty or only whitespace.
    #[error("{field} is an empty string; leave the field unset to keep the current value")]
    EmptyString {
        /// The field, such as `tts.voice`.
        field: &'static str,
    },
    /// `stt.patience` was outside 0..=10.
    #[error(
        "stt.patience is {0}, outside 0..=10: patience is a scale, not milliseconds \
         (the deployment default is 7)"
    )]
    Patience(u32),
}

/// A validated `configure` request body: which sections to touch and how.
///
/// Build it with [`Config::builder`]. Section presence means "touch this section"; an empty
/// `Config` still names the op and is answered.
///
/// ```
/// use voqalize::wire::{Config, Voice};
/// let c = Config::builder().stt_language("ta").tts_language("ta").voice(Voice::OmnivoiceGauri).build()?;
/// assert!(c.needs_string_config());
/// # Ok::<(), voqalize::wire::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    tts: Option<TtsConfig>,
    stt: Option<SttConfig>,
    idle: Option<IdleConfig>,
}

impl Config {
    /// Starts an empty config.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }

    /// Builds from sections, checking the rules of docs/protocol.md §4.9.
    ///
    /// # Errors
    /// [`ConfigError`] when exactly one language leg is set, a string is blank, or patience is
    /// outside 0..=10.
    pub fn new(
        tts: Option<TtsConfig>,
        stt: Option<SttConfig>,
        idle: Option<IdleConfig>,
    ) -> Result<Self, ConfigError> {
        let tts_lang = tts.as_ref().and_then(|t| t.language.as_ref());
        let stt_lang = stt.as_ref().and_then(|s| s.language.as_ref());
        match (tts_lang.is_some(), stt_lang.is_some()) {
            (true, false) => {
                return Err(ConfigError::OneLanguageLeg {
                    set: "tts.language",
                    missing: "stt.language",
                });
            }
            (false, true) => {
                return Err(ConfigError::OneLanguageLeg {
                    set: "stt.language",
                    missing: "tts.language",
                });
            }
            _ => {}
        }
        let blank = |s: &str| s.trim().is_empty();
        if let Some(VoiceChoice::Id(v)) = tts.as_ref().and_then(|t| t.voice.as_ref())
            && blank(v)
        {
            return Err(ConfigError::EmptyString { field: "tts.voice" });
        }
        if let Some(LanguageChoice::Tag(l)) = tts_lang
            && blank(l)
        {
            return Err(ConfigError::EmptyString {
                field: "tts.language",
            });
        }
        if let Some(LanguageChoice::Tag(l)) = stt_lang
            && blank(l)
        {
            return Err(ConfigError::EmptyString {
                field: "stt.language",
            });
        }
        if let Some(p) = stt.as_ref().and_then(|s| s.patience)
            && p > 10
        {
            return Err(ConfigError::Patience(p));
        }
        Ok(Config { tts, stt, idle })
    }

    /// The speech-synthesis section, if touched.
    pub fn tts(&self) -> Option<&TtsConfig> {
        self.tts.as_ref()
    }

    /// The speech-recognition section, if touched.
    pub fn stt(&self) -> Option<&SttConfig> {
        self.stt.as_ref()
    }

    /// The idle section, if touched.
    pub fn idle(&self) -> Option<&IdleConfig> {
        self.idle.as_ref()
    }

    /// True when a voice or language is a plain string, which needs `string_config`.
    pub fn needs_string_config(&self) -> bool {
        let tts = self.tts.as_ref();
        matches!(tts.and_then(|t| t.voice.as_ref()), Some(VoiceChoice::Id(_)))
            || matches!(
                tts.and_then(|t| t.language.as_ref()),
                Some(LanguageChoice::Tag(_))
            )
            || matches!(
                self.stt.as_ref().and_then(|s| s.language.as_ref()),
                Some(LanguageChoice::Tag(_))
            )
    }
}

/// Builds a [`Config`]; [`ConfigBuilder::build`] validates it.
#[derive(Debug, Clone, Default)]
pub struct ConfigBuilder {
    tts: Option<TtsConfig>,
    stt: Option<SttConfig>,
    idle: Option<IdleConfig>,
}

impl ConfigBuilder {
    /// Sets the voice (`tts.voice`): a [`Voice`] or a voice id string.
    #[must_use]
    pub fn voice(mut self, voice: impl Into<VoiceChoice>) -> Self {
        self.tts.get_or_insert_with(Default::default).voice = Some(voice.into());
        self
    }

    /// Sets the spoken language (`tts.language`): a [`Language`] or a BCP-47 tag. Needs
    /// [`stt_language`](Self::stt_language) too.
    #[must_use]
    pub fn tts_language(mut self, language: impl Into<LanguageChoice>) -> Self {
        self.tts.get_or_insert_with(Default::default).language = Some(language.into());
        self
    }

    /// Sets the language listened for (`stt.language`). Needs [`tts_language`](Self::tts_language)
    /// too.
    #[must_use]
    pub fn stt_language(mut self, language: impl Into<LanguageChoice>) -> Self {
        self.stt.get_or_insert_with(Default::default).language = Some(language.into());
        self
    }

    /// Sets both language legs to the same language.
    #[must_use]
    pub fn language(self, language: impl Into<LanguageChoice>) -> Self {
        let l = language.into();
        self.stt_language(l.clone()).tts_language(l)
    }

    /// Sets `stt.patience`, a 0..=10 scale (not ms).
    #[must_use]
    pub fn patience(mut self, patience: u32) -> Self {
        self.stt.get_or_insert_with(Default::default).patience = Some(patience);
        self
    }

    /// Sets `idle.timeout_ms` (0 disables idle detection).
    #[must_use]
    pub fn idle_timeout_ms(mut self, timeout_ms: u32) -> Self {
        self.idle = Some(IdleConfig {
            timeout_ms: Some(timeout_ms),
        });
        self
    }

    /// Touches the idle section without setting a field.
    #[must_use]
    pub fn idle_section(mut self) -> Self {
        self.idle.get_or_insert_with(Default::default);
        self
    }

    /// Validates and builds.
    ///
    /// # Errors
    /// See [`Config::new`].
    pub fn build(self) -> Result<Config, ConfigError> {
        Config::new(self.tts, self.stt, self.idle)
    }
}
