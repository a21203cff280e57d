"""SambaNova Metis (SN40L): the ALCF Inference Service's OpenAI-compatible gateway.

Real, small language models trained by aitestbed on its own documentation answer at
the docs' model names, paced like SN40L (standard library, torch and PyYAML only):
  bpe      the byte-level BPE tokenizer, trained by our code, saved as JSON
  lm       the tiny decoder-only transformer and its token-by-token generation
  chat     the chat templates of the three served names (harmony, mistral, gemma)
  train    `python -m aitestbed.metis.train`: tokenizer and weights from a corpus
  timing   time to first token, tokens/s and cold start, from SambaNova's figures
  config   the gateway's YAML configuration (models, limits, forwarding)
  tokens   the bearer-token store (a JSON file) and the sessions it issues
  device   the device-code login (RFC 8628) as the gateway decides it, and its page
  otp      the users' one-time passcodes (pam_oath's files, TOTP) that complete it
  admin    `python -m aitestbed.metis.admin`: age, revoke, list a user's tokens
  state    the pure decisions: authentication, rate and concurrency limits, model states
  schema   the OpenAI chat-completions request and answers
  engine   the backends: the local model, or a forwarded OpenAI-compatible server
  gateway  the service's state (models, users, the docs' views)
  server   `python -m aitestbed.metis.server`: the HTTP wire (ThreadingHTTPServer, SSE)
  webui    the web UI's pages (the models' states, a chat per model), served by server
  client   a small client of the gateway
"""
