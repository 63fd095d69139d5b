"""The web chat page in a real browser (``kind: web``, architecture §3 "Served over HTTP"):
headless Chromium drives the page of the real daemon, whose provider is the provider wire
server; everything on 127.0.0.1. Skipped, with the reason, where Chromium or its driver is not
installed (``.ci/run`` installs both)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.browser import ARTIFACTS, browser_missing, headless_chromium
from tests.peers.provider_server import ProviderServer
from tests.web_harness import ANSWER_HEAD, ANSWER_TAIL, SECRET, TOKEN, answer_reply, http_daemon

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))

PATH = "/v1/chat/completions"
CHANNELS = """\
  web:
    kind: web
"""
CODE = "print('rendered as a code block')"
SAMPLE_SECS = 0.03
"""How often the page's DOM is sampled while the answer streams, in seconds."""


def _bot_text(driver: Any) -> str:
    texts: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('.message.bot')].map(e => e.innerText)"
    )
    return "\n".join(texts)


def _open_page(driver: Any, port: int) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"http://127.0.0.1:{port}/")
    wait = WebDriverWait(driver, 20)
    wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "li.current")))


def _ask(driver: Any, question: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.find_element(By.ID, "input").send_keys(question + Keys.ENTER)


def _watch(driver: Any, until_secs: float = 60.0) -> tuple[list[str], list[str]]:
    """Sample the page until its answer is over: (every DOM sampled, the distinct answer
    texts seen, in order)."""
    doms: list[str] = []
    states: list[str] = []
    deadline = time.monotonic() + until_secs
    while time.monotonic() < deadline:
        doms.append(driver.execute_script("return document.documentElement.outerHTML"))
        text = _bot_text(driver)
        if text and (not states or states[-1] != text):
            states.append(text)
        busy = driver.execute_script("return document.body.dataset.busy")
        if states and busy == "0":  # sampled once more: the answer may have ended since
            doms.append(driver.execute_script("return document.documentElement.outerHTML"))
            if (text := _bot_text(driver)) != states[-1]:
                states.append(text)
            return doms, states
        time.sleep(SAMPLE_SECS)
    raise TimeoutError(f"the answer did not end; seen: {states[-1:]}")


async def test_the_page_streams_an_answer_without_its_secret(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply(repeat=4, words_delay_secs=0.03, code=CODE)])
        async with http_daemon(provider.url, tmp_path, CHANNELS) as port:

            def session() -> tuple[list[str], list[str], Path]:
                with headless_chromium() as driver:
                    _open_page(driver, port)
                    _ask(driver, "What is my key?")
                    doms, states = _watch(driver)
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    shot = ARTIFACTS / "web-page-finished-answer.png"
                    driver.save_screenshot(str(shot))
                    return doms, states, shot

            doms, states, shot = await anyio.to_thread.run_sync(session)
            size = await anyio.Path(shot).stat()
    assert len(states) >= 3, states  # several visible states, each with the answer's text
    assert all(state.startswith(ANSWER_HEAD[:5]) for state in states), states
    for dom in doms:
        assert SECRET[:12] not in dom
    final = states[-1]
    assert ANSWER_TAIL.strip() in final and "REDACTED" in final
    assert "<pre><code" in doms[-1] and "rendered as a code block" in doms[-1]  # Markdown
    assert "<script" not in doms[-1].split('id="messages"')[1]  # sanitised
    assert size.st_size > 1000
    print(f"screenshot: {shot}")


async def test_stop_ends_the_provider_stream(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply(repeat=40, words_delay_secs=0.05)])
        async with http_daemon(provider.url, tmp_path, CHANNELS) as port:

            def session() -> list[str]:
                from selenium.webdriver.common.by import By

                with headless_chromium() as driver:
                    _open_page(driver, port)
                    _ask(driver, "Tell me a long story")
                    deadline = time.monotonic() + 30
                    while ANSWER_HEAD[:10] not in _bot_text(driver):
                        assert time.monotonic() < deadline, "no answer appeared"
                        time.sleep(SAMPLE_SECS)
                    driver.find_element(By.ID, "stop").click()
                    return _watch(driver)[1]

            states = await anyio.to_thread.run_sync(session)
            (request,) = provider.requests_to(PATH)
            with anyio.fail_after(10):
                await request.wait_ended()
    assert request.client_closed  # the provider's stream was closed, not finished
    assert states[-1].rstrip().endswith("⏹ Stopped.")


async def test_with_tokens_the_page_at_its_path_asks_for_one_and_then_chats(tmp_path: Path) -> None:
    channels = (  # served under a path of its own: its page, script and API are there
        '  web:\n    kind: web\n    path: "/team"\n    auth: tokens\n    tokens: ["${API_TOKEN}"]\n'
    )
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()])
        async with http_daemon(provider.url, tmp_path, channels) as port:

            def session() -> tuple[bool, list[str]]:
                from selenium.webdriver.common.by import By
                from selenium.webdriver.support import expected_conditions
                from selenium.webdriver.support.ui import WebDriverWait

                with headless_chromium() as driver:
                    driver.get(f"http://127.0.0.1:{port}/team/")
                    wait = WebDriverWait(driver, 20)
                    signin = (By.ID, "signin")
                    wait.until(expected_conditions.visibility_of_element_located(signin))
                    listed_before = bool(driver.find_elements(By.CSS_SELECTOR, "li"))
                    driver.find_element(By.ID, "token").send_keys(TOKEN)
                    driver.find_element(By.CSS_SELECTOR, "#signin-form button").click()
                    wait.until(
                        expected_conditions.presence_of_element_located(
                            (By.CSS_SELECTOR, "li.current")
                        )
                    )
                    assert not driver.find_element(*signin).is_displayed()
                    _ask(driver, "What is my key?")
                    return listed_before, _watch(driver)[1]

            listed_before, states = await anyio.to_thread.run_sync(session)
    assert not listed_before  # nothing of the API before the token
    assert ANSWER_TAIL.strip() in states[-1] and SECRET[:12] not in states[-1]


def _wait_for(driver: Any, script: str, until_secs: float = 30.0) -> Any:
    """Poll ``script`` (a JavaScript expression) until it is truthy; returns its value."""
    deadline = time.monotonic() + until_secs
    while not (value := driver.execute_script("return " + script)):
        assert time.monotonic() < deadline, f"never true: {script}"
        time.sleep(SAMPLE_SECS)
    return value


async def test_a_refusal_is_one_line_and_new_chats_the_list_and_deleting_still_work(
    tmp_path: Path,
) -> None:
    limits = "limits:\n  user: {messages_per_minute: 1}\n"
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply(words_delay_secs=0.0)] * 2)
        async with http_daemon(provider.url, tmp_path, CHANNELS, policy=limits) as port:

            def session() -> tuple[str, list[str], str]:
                from selenium.webdriver.common.by import By

                with headless_chromium() as driver:
                    _open_page(driver, port)
                    _ask(driver, "What is my key?")
                    _watch(driver)
                    _ask(driver, "And again?")
                    refusal = _wait_for(
                        driver,
                        "[...document.querySelectorAll('.message.bot')]"
                        ".map(e => e.innerText).find(t => t.startsWith('⛔'))",
                    )
                    _wait_for(driver, "document.body.dataset.busy === '0'")
                    first = driver.find_element(By.CSS_SELECTOR, "li.current").get_attribute(
                        "data-id"
                    )
                    _ask(driver, "/new")
                    _wait_for(
                        driver,
                        f"document.querySelector('li.current')?.dataset.id !== '{first}'"
                        " && document.querySelectorAll('#conversations li').length === 2"
                        " && document.querySelectorAll('.message').length === 0",
                    )
                    titles = [s.text for s in driver.find_elements(By.CSS_SELECTOR, "li span")]
                    driver.find_element(By.CSS_SELECTOR, f"li[data-id='{first}']").click()
                    shown = _wait_for(
                        driver,
                        "document.querySelectorAll('.message').length === 4"
                        " && document.getElementById('messages').innerText",
                    )
                    # Deleted from the list (after the page asks): the other one opens.
                    driver.find_element(By.CSS_SELECTOR, f"li[data-id='{first}'] .delete").click()
                    driver.switch_to.alert.accept()
                    _wait_for(
                        driver,
                        "document.querySelectorAll('#conversations li').length === 1"
                        f" && document.querySelector('li.current')?.dataset.id !== '{first}'",
                    )
                    return refusal, titles, shown

            refusal, titles, shown = await anyio.to_thread.run_sync(session)
    assert refusal.startswith("⛔ You are sending more than 1 message a minute: try again in")
    assert "\n" not in refusal.strip()  # one line
    assert len(provider.requests_to(PATH)) == 1  # the refused message asked no model
    assert titles == ["New chat", "What is my key?"]  # the new one first, the old one kept
    assert "What is my key?" in shown and "And again?" in shown and refusal in shown
