"""# CalendarBooking: `uirl/CalendarBooking-v0`

![A CalendarBooking episode](../images/tasks/calendar_booking.png)

A calendar app like Google Calendar or Outlook, in a work-week view, with the events
of a team. The instruction asks to book a meeting of a given length with some
colleagues in the first slot when everyone is free, within a day range and given hours.
The agent has to find that slot by reading the calendars (showing the attendees'
calendars, hiding the others, moving through the weeks), then create the event
through a dialog: a title, a date picker, start and end time lists, guests picked from
an autocomplete. The result is scored, not the way there: the task compares the events
created with the asked booking, field by field.

```python
import gymnasium as gym
import uirl_gym

env = gym.make("uirl/CalendarBooking-v0")  # task id calendar_booking, TimeLimit of 60 steps
obs, info = env.reset(seed=0, options={"split": "test"})
obs["instruction"]
# 'In the Calendar app, book a 30-minute meeting titled "Quarterly planning" with Priya
#  Sharma and Tom Baker in the first slot when all of you are free: on a weekday from
#  Thursday 30 March to Friday 7 April, starting no earlier than 9:00 and ending by
#  17:00. Invite exactly these people and create no other events.'
```

## What it tests

- **Reading a calendar.** The week view shows Monday to Friday, 8:00 to 18:00, half an
  hour per grid row (the hours outside 9:00 to 17:00 are shaded). Each calendar has
  its colour; an event shows its title, the person's first name and its times, and
  overlapping events share the column side by side. A click on an event opens its
  details (title, date, times, whose calendar).
- **Choosing what to read.** At the start only the owner's calendar ("Alex Morgan") is
  shown, plus the calendars of `distractors` colleagues who are *not* invited; the
  sidebar lists eight team calendars to show or hide. A distractor always has an event
  over the answer slot, so an agent that takes every shown event as a constraint books
  a later slot.
- **Constraints.** The slot must be on a weekday in the day range, start no earlier
  than the given time and end by the given time (both on the half hour), and leave the
  owner and every attendee free for the whole meeting (30, 60 or 90 minutes). "First"
  means the earliest day, then the earliest start. There is no current time: slots
  earlier on today count.
- **Several weeks.** The first free slot is in the `weeks`-th week (1 is the week the
  app opens on): every slot before it is taken by someone's event, so the agent has to
  move forward (the arrows next to *Today*; events are seeded from the week before
  today to the week after the range, other weeks are empty).
- **A creation dialog.** *Create* opens "New event" for today at 9:00; a click on an
  empty grid cell opens it for that day and half hour (an hour long, the title field
  focused). The date button opens a month calendar (previous and next month arrows);
  the start and end buttons open lists of half hours that scroll (the end list shows
  each choice's duration, and a new start keeps the meeting's length). *Add guests*
  suggests people from the company directory whose name or email contains the typed
  text, look-alikes together ("Priya Shah" and "Priya Sharma", "Tom Becker" and "Tom
  Baker"); a click or Enter adds the first one, the × next to a guest removes them.
  Save (or Enter in the title) saves; an empty title gets "Add a title". Escape closes
  an open list, then the dialog.
- **Undoing a mistake.** The owner's saved events can be opened and deleted (the bin
  icon in their details).

Each episode is seeded: the week (in 2026 to 2028), the team and who is invited (from
26 people), every event (`busyness` per person and weekday on average, 30 minutes to
2 hours, titles from a list of 22), the title, length, range and hours of the meeting.
Nothing is fetched from the network.

## Options (`env.reset(options=...)` or `gym.make(..., default_options=...)`)

| option | default | range | effect |
| --- | --- | --- | --- |
| `num_attendees` | 2 | 1..4 | People to invite besides the owner. |
| `busyness` | 3 | 1..5 | Mean events per person per weekday. |
| `weeks` | 2 | 1..3 | The week that holds the first free slot (1: the week the app opens on). |
| `distractors` | 1 | 0..3 | Calendars of colleagues not invited that are shown at the start, each with an event over the answer. |
| `split` | the env's | `train`, `test` | Which range of task seeds the episode comes from (the env's option, as for every task). |

A bad option raises `TaskOptionsError` (a `ValueError`) in `env.reset`, before any
request reaches the server. The message says what was expected, e.g.
`weeks: must be an integer in 1..3, got 4`.

## Record and reward

Saving an event records it with `window.uirlRecord({type: "create", event: {id, title,
date, start, end, attendees}})` (times in minutes after midnight, attendees by name, the
owner not among them); deleting one records `{type: "delete", id}`. `/progress` scores
the created events against the asked booking
(`uirl_gym.tasks.calendar_booking.data.evaluate`):

- `fields`: `title`, `date`, `start`, `end`, `attendees`, in the order of `matched`;
- `matched`: per field, whether the best-matching created event (the most right
  fields; the earliest created on a tie) has it right. The title compares after
  trimming spaces (case counts); attendees must be exactly the asked people;
- `num_events` and `num_extra` (created events besides the best one);
- `events`: the first five created events; `num_changes`: creations and deletions.

The score of a record is `correct_field` (0.2) per right field minus `extra_event`
(0.5) per extra event. The sparse reward of a step is the change of that score: a right
booking earns 1.0, deleting an extra event refunds its charge. The episode terminates
when one event has every field right; `is_success` needs, in addition, no other created
event at that moment. Dense mode (`reward_mode="dense"`) adds the change of a
potential: `dense_draft` (0.02) per field the open dialog has right, `dense_calendar`
(0.01) per attendee whose calendar is shown, and `dense_week` (0.05) while the week of
the asked slot is shown. Refused actions cost `invalid_action` (0.1). All weights:
`uirl_gym.tasks.calendar_booking.score.RewardConfig`. Info on every step:
`is_success`, `num_matched`, `num_extra`, `progress`; reset info has `fields`.

## Expert

`uirl_gym.tasks.calendar_booking.expert.CalendarBookingExpert` plans from
`env.unwrapped.oracle()` (the asked booking, the created events, the shown calendars
and week, the open dialog with its values and open list, and element boxes: sidebar
rows, week arrows, day columns and grid geometry, dialog controls, time list items,
date picker days, guest suggestions, the owner's events) and acts only with clicks,
typing, keys and the mouse wheel. In this order:

1. a created event that is not the booking (or a second copy): cancel an open dialog,
   show the owner's calendar, go to its week, open it, delete it;
2. with no dialog open: show the owner's and the attendees' calendars and hide the
   others (one click each, in one macro), go to the asked week (as many clicks on the
   arrow as weeks), click the slot's empty cell;
3. in the dialog, the first wrong field: the title (typed, after a click when the
   field is not focused), the date (the date
   picker, a month per click, then the day), the start and the end (open the list,
   scroll it with the wheel when the time is out of view, click the time), a guest
   nobody asked for (×), a missing guest (type the name, click the suggestion);
4. Save.

It re-plans after each macro (one to three actions, or the clicks of step 2), so it recovers from whatever the
page shows.

## Baselines (test split, default options)

| agent | success | mean steps |
| --- | --- | --- |
| `CalendarBookingExpert` | 1.00 (20 episodes) | 13.5 |
| `RandomPolicy(seed=0)` | 0.00 (10 episodes; none saved an event) | 60 (the time limit) |

Measured on 2026-11-25 with `python scripts/task_report.py --task calendar_booking --episodes 20
--random-episodes 10`: episode `k` is `reset(seed=k)` on the test split with the
default options, at most 60 steps (the same run writes this task's row in
docs/tasks.md). Other options: the env's `reset(options=...)`.

The picture above is test-split episode 0 (default options) at reset, as
`scripts/task_report.py` makes it.

The tests (`tests/test_task_calendar_booking.py`) check that the generated booking is
the first free slot of the owner and the attendees in the asked week (and not the
first one when the distractors count), the scoring and the record's checks, that the
expert solves 20 test-split episodes with options varied over their ranges, that the
date picker, the scrolled start list and the guest suggestions work from *Create*,
that extra events are charged and the expert deletes them, and that the expert still
succeeds after random actions.

## Episode end

- **Terminated** when an event matches the request in every field: the step that completes it.

## Version history

- `v0` (2026-11-25): the first version.
"""

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.calendar_booking import score
from uirl_gym.tasks.calendar_booking.expert import CalendarBookingExpert
from uirl_gym.tasks.calendar_booking.task import CalendarBookingTask

TASK_SPEC = TaskSpec(
    name="calendar_booking",
    env_id="uirl/CalendarBooking-v0",
    task=CalendarBookingTask,
    rewards=score.RewardConfig,
    scorer=score.CalendarBookingScorer,
    check_options=score.check_options,
    expert=CalendarBookingExpert,
    doc=__doc__,
)
