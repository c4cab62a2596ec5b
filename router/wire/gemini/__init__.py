"""The Gemini API (generateContent, streamGenerateContent): Gemini CLI and the google-genai SDKs."""
