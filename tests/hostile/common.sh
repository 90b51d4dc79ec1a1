# Shared by the hostile agents: make a scripted checkpoint and submit it like an honest agent would.
# Each agent then does its one attack on the files the harness reads after the run.
REPO="$(cd "$AUTORL_AGENT_DIR/../../.." && pwd)"

make_ckpt() {  # NAME DEV_CORRECT TEST_CORRECT
    "$AUTORL_PYTHON" -c "import sys; sys.path.insert(0, '$REPO')
from pathlib import Path
from tests.conftest import write_stub_checkpoint, echo_answers
write_stub_checkpoint(Path('$OUTPUT_DIR') / '$1', {**echo_answers($2), **echo_answers($3, 'test')})"
}

submit() {
    curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \
        -H "Authorization: Bearer $AUTORL_TOKEN" -d "{\"model_path\": \"$OUTPUT_DIR/$1\"}"
    echo
}
