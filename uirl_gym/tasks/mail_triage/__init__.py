"""# MailTriage: `uirl/MailTriage-v0`

![A MailTriage episode](../images/tasks/mail_triage.png)

A webmail client like Outlook or Gmail: a folder list on the left, the open folder's
message list in the middle and a reading pane on the right. The instruction asks to
triage the inbox: move some messages into named folders, flag some, mark some as
unread, and reply to one with a given text. Each message is named by a description,
never by its place in the list: its sender, words of its subject, or something only
its text says (the agent has to open messages to find it). The result is scored, not
the way there: the task compares the final mailbox and the replies sent with the goals.

```python
import gymnasium as gym
import uirl_gym

env = gym.make("uirl/MailTriage-v0")  # task id mail_triage, TimeLimit of 60 steps
obs, info = env.reset(seed=0, options={"split": "test"})
obs["instruction"]
# 'Triage the inbox: move the email that mentions reference 77440 to Archive; move the
#  email whose subject mentions "Application 6027" to Hiring; mark the email whose
#  subject mentions "School trip form 2835" as unread; reply to the email from Ibrahim
#  Novak with "Received, thanks. I have forwarded it to finance". Leave everything else
#  as it is.'
```

## What it tests

- **Finding a message from a description.** Three kinds of clue:
  - the sender: `the email from Priya Natarajan` (no other message has that sender);
  - the subject: `the email whose subject mentions "Invoice 4821"` (the subject's
    words up to its number);
  - the text: `the email that mentions reference 48213`. The list shows sender,
    subject and date but no preview, so only the reading pane shows a message's text:
    the agent opens messages until it finds the one that says it.
- **Drag and drop.** A message moves by dragging its row from the list onto a folder
  in the folder list (the env's `drag` action: press, move, release). The folder under
  the pointer is highlighted while dragging; a drop anywhere else, or on the folder
  the message is already in, moves nothing.
- **A context menu with a submenu.** A right click on a row opens *Open*, *Reply*,
  *Flag* (or *Unflag*), *Mark as unread* (or *as read*), *Move to ›* (a submenu of the
  folders, opened by pointing at it or clicking it) and *Delete* (moves it to Trash).
  Escape or a click elsewhere closes it.
- **Flags and read state.** The flag button at the right of each row toggles its
  flag; the reading pane's toolbar has *Reply*, *Flag* and *Mark as unread*. Opening a
  message marks it read, as in a real client: a message asked to be marked as unread
  has to be marked after it was last opened.
- **Replying.** *Reply* opens a reply box above the message (To, Subject: Re: ...,
  a text box, *Send*, *Discard*). *Send* with an empty box is refused with a message;
  a sent reply shows in the Sent folder and cannot be taken back.
- **Folders.** Inbox (with its unread count), Drafts, Sent, Archive, Trash, and four
  user folders per episode (from Travel, Receipts, Projects, Clients, Family,
  Newsletters, Hiring), each with a few older messages. Clicking a folder shows its
  messages: a message moved to the wrong folder can be found there and moved back.
- **Distractors.** Other messages made to look like a target under its clue: the same
  first name from another person, the same subject words with the digits swapped, or
  a text that mentions the reference with two digits swapped. Acting on them is a
  stray change.
- **Leaving the rest alone.** Any other message moved, and any other message's flag
  changed, is charged while it stays. Reading messages is free.
- **A long inbox.** About 11 messages fit in the list; more need scrolling (the mouse
  wheel over the list).

Each episode is seeded: the people (30 first names, 30 last names), their messages
(18 subject templates with 4-digit numbers, bodies with a 5-digit reference), dates
(this week in the inbox, older in the folders), which messages start unread or
flagged, the user folders, the goals and their clues. Nothing is fetched from the
network.

## Options (`env.reset(options=...)` or `gym.make(..., default_options=...)`)

| option | default | range | effect |
| --- | --- | --- | --- |
| `messages` | 10 | 4..40 | Messages in the inbox. More than about 11 need scrolling. |
| `num_triage` | 3 | 1..8 | Messages to move, flag or mark as unread (one goal each, on different messages). At least two are moves when there are two or more. |
| `distractors` | 2 | 0..5 | Targets that get a look-alike message (at most one per target, reply included). |
| `reply` | `true` | bool | Whether the instruction also asks to reply to a message with a given text (last). |
| `split` | the env's | `train`, `test` | Which range of task seeds the episode comes from (the env's option, as for every task). |

The inbox must hold every target and every look-alike: `messages` is at least
`num_triage + reply + distractors`. A bad option raises `TaskOptionsError` (a
`ValueError`) in `env.reset`, before any request reaches the server. The message says
what was expected, e.g. `messages: must be an integer in 4..40, got 41` or
`messages: at least 7 for num_triage=4, reply=True and distractors=2 (each target and
look-alike is a message), got 6`.

## Record and reward

After every change (a move, a flag, a message read or marked unread) the app records
every message's state with `window.uirlRecord({type: "mailbox", messages: [{id,
folder, flagged, read}, ...]})`, and each reply sent with `{type: "reply",
in_reply_to, body}`. `/progress` scores them against the goals
(`uirl_gym.tasks.mail_triage.data.evaluate`):

- `goals`: each goal's kind (`move`, `flag`, `unread`, `reply`), in the order of `met`;
- `met`: per goal, whether the record meets it now: the message is in the named
  folder, flagged, unread, or a reply to it with the asked text was sent (spaces and
  line breaks compare as one space; case and punctuation count);
- `num_stray` and `stray` (the first 10, one line each, e.g. `'Invoice 2617 for
  October services' moved to Trash`, `'Order #6018 has shipped' flagged`, `reply to
  'Quote 4207 for the spring campaign': 'Sounds good'`). A message to be moved that is
  still in the inbox is an unmet goal; in any other wrong folder it is a stray change
  too. A second reply, a reply with other words or to another message is a stray
  change for good;
- `num_sent`, `num_changes`: replies sent, changes recorded.

The score of a record is `correct_goal` (1.0) per goal met minus `stray_change` (0.5)
per stray change. The sparse reward of a step is the change of that score: moving a
message back refunds its charge, and a goal met and then broken again is paid back.
The episode terminates when every goal is met; `is_success` needs, in addition, no
stray change at that moment. Dense mode (`reward_mode="dense"`) adds the change of a
potential: `dense_goal` (0.1) per goal the page's mailbox meets and `dense_pending`
(0.05) while the reply box of the right message holds the asked text, not sent yet.
Refused actions cost `invalid_action` (0.1). All weights:
`uirl_gym.tasks.mail_triage.score.RewardConfig`. Info on every step: `is_success`,
`num_met`, `num_stray`, `progress`; reset info has `goals`.

## Expert

`uirl_gym.tasks.mail_triage.expert.MailTriageExpert` plans from
`env.unwrapped.oracle()` (the goals, the page's mailbox and replies, the open folder
and message, the reply box, the context menu and its submenu, element boxes: folders,
visible rows and their flag buttons, toolbar buttons) and acts only with clicks, right
clicks, drags, typing, keys and the mouse wheel. It scores the page's mailbox with the
task's own `evaluate` and fixes what is wrong, in this order:

1. a reply box it does not need: *Discard*;
2. stray changes, before the last goal ends the episode: a message where it should not
   be is fetched back (open its folder, right click, *Move to*, the folder); another
   message's flag is set back (the row's flag button);
3. moves: the first, third, ... move goal by dragging the row onto the folder, the
   others (and a target already moved to a wrong folder) through the context menu;
4. flags: the row's flag button;
5. mark as unread: right click, *Mark as unread*;
6. the reply: click the row (opens it), *Reply*, click the box and type the text
   (`ctrl+a` first if it holds other text), *Send*.

It re-plans after each macro (one to three actions), so it recovers from whatever the
page shows; it opens the folder a message is in and scrolls its row into view before
it acts on it.

## Baselines (test split, default options)

| agent | success | mean steps |
| --- | --- | --- |
| `MailTriageExpert` | 1.00 (20 episodes) | 10.3 |
| `RandomPolicy(seed=0)` | 0.00 (10 episodes; no goal met, 0 or 1 stray change each) | 60 (the time limit) |

Measured on 2026-11-25 with `python scripts/task_report.py --task mail_triage --episodes 20
--random-episodes 10`: episode `k` is `reset(seed=k)` on the test split with the
default options, at most 60 steps (the same run writes this task's row in
docs/tasks.md). Other options: the env's `reset(options=...)`.

The picture above is test-split episode 0 (default options) at reset, as
`scripts/task_report.py` makes it.

The tests (`tests/test_task_mail_triage.py`) check that the expert solves 20
test-split episodes (every goal kind and clue; moves both dragged and through the
context menu; every fourth inbox of 24 messages, long enough to scroll), that wrong
changes made through the app (a drag onto Trash, a flag and a wrong move from the
context menu) are charged and refunded when the expert puts them back, that a drag
dropped outside any folder and opening a message cost nothing, that a wrong reply is
charged for good, and that the expert still succeeds after random actions.

## Episode end

- **Terminated** when every goal of the instruction is met by the mailbox: the step that completes it.

## Version history

- `v0` (2026-11-25): the first version.
"""

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.mail_triage import score
from uirl_gym.tasks.mail_triage.expert import MailTriageExpert
from uirl_gym.tasks.mail_triage.task import MailTriageTask

TASK_SPEC = TaskSpec(
    name="mail_triage",
    env_id="uirl/MailTriage-v0",
    task=MailTriageTask,
    rewards=score.RewardConfig,
    scorer=score.MailTriageScorer,
    check_options=score.check_options,
    expert=MailTriageExpert,
    doc=__doc__,
)
