"""Recall quality: lexical-only vs hybrid (full-text + embeddings) on a paraphrase set.

Usage::

    .venv/bin/python bench/recall_quality.py [--min-score 0.3] [--verbose]

Seeds a temporary SQLite database with FACTS (150 first-person statements by
five users, at user and project scopes, all siblings under one tenant) through
``memory.services.remember``, then asks QUESTIONS (worded differently from the
facts) at the asker's scope, once with ``AETNAWEB_SEMANTIC_RECALL`` off
(lexical only) and once on (hybrid), with ``limit=3`` and ``min_score`` at the
prompt-injection threshold (0.3), i.e. what an agent would actually get.

Prints recall@1 and recall@3 over the questions that have an answer, the
false-positive rate over the negatives (questions whose right answer is
nothing: a negative "fails" if anything is returned), and how many returned
records belonged to another user (must be 0). Also prints the embedding cost
per text on its own.

``--calibrate`` fits the confidence (memory.ranking) on the calibration set
(the even-numbered QUESTIONS and CALIBRATION_QUESTIONS), chooses the
threshold on its out-of-fold confidences and scores the held-out half (the
odd-numbered QUESTIONS), for the product's model and for the match with its
margin over the other candidates (see docs/memory-engine-notes.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

# user, project ("*" = the user's own scope), key, statement
FACTS = """
alice	*	beef	I avoid beef at business dinners.
alice	*	allergy	I am allergic to penicillin.
alice	*	commute	I commute by bicycle every day.
alice	*	airline	My preferred airline is KLM.
alice	*	coffee	I take my coffee black.
alice	*	sister	My sister Maria lives in Lisbon.
alice	*	dog	My dog is a beagle named Pixel.
alice	*	language	I speak fluent Portuguese and some German.
alice	*	gym	I go running before work on Tuesdays and Thursdays.
alice	*	seat	I always want an aisle seat on long flights.
alice	*	hotel	I prefer small boutique hotels over big chains.
alice	*	birthday	My birthday is on the ninth of March.
alice	*	editor	My code editor is Neovim.
alice	*	timezone	I work from Amsterdam, in Central European Time.
alice	*	music	I listen to jazz while I write.
alice	*	car	I do not own a car.
alice	*	meetings	I keep Friday afternoons free of meetings.
alice	*	phone	My work phone is an old Android.
alice	trip	budget	The Tokyo trip budget is 4000 euros.
alice	trip	dates	We fly out to Tokyo on the 12th of April.
alice	trip	ryokan	I booked two nights in a ryokan in Kyoto.
alice	trip	rail	I bought a seven day Japan Rail pass.
alice	trip	visa	Dutch citizens need no visa for a short stay in Japan.
alice	trip	insurance	My travel insurance is with Allianz.
alice	thesis	topic	My thesis is about soil erosion in olive groves.
alice	thesis	advisor	Professor Okafor supervises my thesis.
alice	thesis	deadline	The thesis draft is due at the end of June.
alice	thesis	tool	I write the thesis in LaTeX with Overleaf.
alice	*	reading	I am reading a biography of Ada Lovelace.
alice	*	plant	I keep a fig tree on my balcony.
bob	*	diet	I am vegan.
bob	*	allergy	I cannot eat peanuts, they make me very ill.
bob	*	commute	I drive to the office in an electric Kia.
bob	*	airline	I fly Lufthansa whenever I can.
bob	*	kids	I have two daughters, aged six and nine.
bob	*	sport	I play football with colleagues on Wednesdays.
bob	*	shirt	My shirt size is large.
bob	*	home	I live in a flat in Munich.
bob	*	wake	I get up at half past five.
bob	*	tea	I drink green tea, never coffee.
bob	*	laptop	My laptop is a ThinkPad X1 Carbon.
bob	*	bank	My bank is ING.
bob	*	holiday	Every summer we rent a cabin in Norway.
bob	*	wine	I do not drink alcohol.
bob	*	pet	We have a grey cat called Mochi.
bob	*	hobby	I build model railways in the basement.
bob	*	doctor	My GP is Dr. Weber on Lindenstrasse.
bob	*	glasses	I am short-sighted and wear contact lenses.
bob	renovation	builder	Kraus and Sons are renovating our kitchen.
bob	renovation	budget	The kitchen renovation may cost at most 25000 euros.
bob	renovation	floor	We chose oak floorboards for the kitchen.
bob	renovation	finish	The builders should finish by October.
bob	renovation	permit	The city approved the building permit in May.
bob	launch	date	The product launch is planned for the 3rd of November.
bob	launch	owner	Priya owns the launch checklist.
bob	launch	channel	Launch updates go to the #launch-room Slack channel.
bob	*	podcast	I listen to history podcasts on my commute.
bob	*	blood	My blood type is O negative.
bob	*	shoes	My shoe size is 44.
bob	*	language	I am learning Japanese on evenings.
carol	*	diet	I eat fish but no other meat.
carol	*	allergy	Shellfish gives me hives.
carol	*	commute	I take the tram to work.
carol	*	airline	I collect miles with Air France.
carol	*	partner	My husband Tom is a nurse.
carol	*	sport	I swim three mornings a week.
carol	*	home	We moved to a house in Lyon last year.
carol	*	instrument	I play the cello in an amateur orchestra.
carol	*	sleep	I go to bed early, around ten.
carol	*	coffee	I like my coffee with oat milk.
carol	*	phone	My phone is an iPhone 15.
carol	*	email	My personal email is carol.martin@example.org.
carol	*	birthday	I was born on the 2nd of August 1988.
carol	*	pet	I am afraid of dogs.
carol	*	reading	I prefer audiobooks to paper books.
carol	*	hotel	I need a hotel room with a bathtub.
carol	*	garden	I grow tomatoes and basil in the garden.
carol	*	politics	I volunteer for a local climate group.
carol	bakery	name	The bakery will be called Pain Perdu.
carol	bakery	location	The bakery is on Rue Mercière.
carol	bakery	opening	We open the bakery at seven every morning.
carol	bakery	oven	We bought a wood-fired oven from Italy.
carol	bakery	staff	Julien is the head baker.
carol	bakery	loan	The bank loan for the bakery is 80000 euros.
carol	*	medication	I take levothyroxine for my thyroid every morning.
carol	*	car	I drive a blue Renault Zoe.
carol	*	holiday	We spend Christmas with my parents in Brittany.
carol	*	language	My mother tongue is French; my English is good.
carol	*	work	I work as an accountant.
carol	*	weekend	On Sundays I visit the market.
dan	*	diet	I keep kosher.
dan	*	allergy	I am lactose intolerant.
dan	*	commute	I work from home and never commute.
dan	*	airline	I avoid budget airlines.
dan	*	kids	My son Eli starts school in September.
dan	*	sport	I climb at the bouldering gym.
dan	*	home	I live in Tel Aviv near the beach.
dan	*	job	I am a backend developer at a fintech startup.
dan	*	editor	I write code in VS Code.
dan	*	shell	My shell is zsh with oh-my-zsh.
dan	*	os	I run Fedora on my desktop.
dan	*	keyboard	I type on a split ergonomic keyboard.
dan	*	coffee	I drink espresso, three a day.
dan	*	sleep	I suffer from insomnia.
dan	*	music	I play bass guitar in a band.
dan	*	reading	I read science fiction, mostly Le Guin.
dan	*	pet	We have a parrot that talks.
dan	*	car	I ride a scooter in the city.
dan	api	language	The payments API is written in Go.
dan	api	database	The payments service stores data in PostgreSQL.
dan	api	deploy	We deploy the API to Kubernetes every Thursday.
dan	api	oncall	I am on call the first week of every month.
dan	api	ratelimit	The public API allows 100 requests per second per client.
dan	api	auth	Clients authenticate with OAuth client credentials.
dan	*	birthday	My birthday is the 30th of December.
dan	*	holiday	I am off for two weeks in August.
dan	*	languages	I speak Hebrew, English and Russian.
dan	*	doctor	My dentist is Dr. Levi.
dan	*	bank	I keep my savings in index funds.
dan	*	volunteering	I coach a youth chess club.
erin	*	diet	I avoid gluten because of coeliac disease.
erin	*	allergy	Bee stings are dangerous for me; I carry an EpiPen.
erin	*	commute	I walk to work, it takes twenty minutes.
erin	*	airline	I only fly with Qantas.
erin	*	home	I live in Melbourne.
erin	*	sport	I do yoga every evening.
erin	*	partner	My wife Jess is a teacher.
erin	*	pet	Our kelpie is called Scout.
erin	*	coffee	I order a flat white every morning.
erin	*	job	I am a civil engineer working on bridges.
erin	*	car	I drive a Toyota Hilux.
erin	*	music	My favourite band is Crowded House.
erin	*	reading	I like crime novels.
erin	*	garden	I keep chickens in the backyard.
erin	*	hotel	I want a gym in every hotel I stay at.
erin	*	seat	I prefer window seats.
erin	*	language	I am learning Italian for a trip next year.
erin	*	birthday	My birthday is the 14th of July.
erin	bridge	client	The bridge project is for VicRoads.
erin	bridge	span	The new bridge spans 120 metres.
erin	bridge	material	The deck is precast concrete.
erin	bridge	deadline	Construction must finish before the wet season.
erin	bridge	risk	Flooding of the river is the main project risk.
erin	bridge	team	Sam leads the site crew.
erin	*	health	I have high blood pressure.
erin	*	weekend	I go surfing on weekends.
erin	*	phone	My phone number ends in 4471.
erin	*	social	I am not on Facebook.
erin	*	savings	I am saving for a house deposit.
erin	*	shoes	I wear size 39 shoes.
"""

# user, project asked from, question, expected key ("-": nothing should come back)
QUESTIONS = """
alice	*	Am I vegetarian?	beef
alice	*	What food should you not order for me?	beef
alice	*	Can you give me amoxicillin for this infection?	allergy
alice	*	How do I get to the office?	commute
alice	*	Which carrier do I usually fly with?	airline
alice	*	How should you make my drink in the morning?	coffee
alice	*	Do I have any siblings?	sister
alice	*	What kind of pet do I have?	dog
alice	*	Which foreign tongues do I know?	language
alice	*	When do I exercise?	gym
alice	*	Window or aisle for my flight to Tokyo?	seat
alice	*	What sort of accommodation do I like?	hotel
alice	*	When should you wish me many happy returns?	birthday
alice	*	What program do I program in?	editor
alice	*	Which city am I based in?	timezone
alice	*	Should I rent a vehicle or do I have one?	car
alice	*	Can you book a call on Friday at 3pm?	meetings
alice	trip	How much money can we spend in Japan?	budget
alice	trip	When is our departure?	dates
alice	trip	Where are we staying in Kyoto?	ryokan
alice	trip	Do we need to buy train tickets?	rail
alice	thesis	What is my research about?	topic
alice	thesis	Who is my supervisor?	advisor
alice	thesis	When must I hand in the draft?	deadline
alice	*	What book am I in the middle of?	reading
bob	*	Can you find me a steakhouse for dinner?	diet
bob	*	Are there any nuts I should stay away from?	allergy
bob	*	What vehicle do I use to get to work?	commute
bob	*	Do I have children?	kids
bob	*	What team sport do I do?	sport
bob	*	Which city do I live in?	home
bob	*	What hot drink should you bring me?	tea
bob	*	What computer do I use?	laptop
bob	*	Where do we go on vacation in summer?	holiday
bob	*	Should I pour you a beer?	wine
bob	*	Do I have any animals at home?	pet
bob	*	Who is my family physician?	doctor
bob	*	Do I need glasses?	glasses
bob	renovation	Who is doing the building work?	builder
bob	renovation	What is the spending cap for the kitchen?	budget
bob	renovation	When will the works be done?	finish
bob	launch	When do we ship the product?	date
bob	launch	Who is responsible for the release checklist?	owner
bob	*	What do I listen to while driving?	podcast
carol	*	Do I eat meat?	diet
carol	*	Can I have prawns?	allergy
carol	*	How do I travel to my job?	commute
carol	*	Am I married?	partner
carol	*	What musical instrument do I play?	instrument
carol	*	What time do I go to sleep?	sleep
carol	*	What pills do I take daily?	medication
carol	*	What is my profession?	work
carol	*	Where do we celebrate the holidays in December?	holiday
carol	*	What do I grow in the garden?	garden
carol	bakery	What is the shop's name?	name
carol	bakery	What street is the shop on?	location
carol	bakery	How much did we borrow?	loan
carol	bakery	Who runs the kitchen?	staff
dan	*	Can I have a cheeseburger?	allergy
dan	*	Do I eat pork?	diet
dan	*	Do I have to travel to an office?	commute
dan	*	What do I do for a living?	job
dan	*	Which Linux distribution do I use?	os
dan	*	How well do I sleep?	sleep
dan	*	What instrument do I play?	music
dan	api	What programming language is the service built in?	language
dan	api	Which database does the service use?	database
dan	api	When do we release to production?	deploy
dan	api	How many calls per second are allowed?	ratelimit
dan	*	Which languages can I talk in?	languages
erin	*	Can I eat regular bread?	diet
erin	*	What happens if a wasp stings me?	allergy
erin	*	How do I get to my job?	commute
erin	*	What dog do we have?	pet
erin	*	What is my occupation?	job
erin	*	What vehicle do I own?	car
erin	*	Who is my spouse?	partner
erin	bridge	How long is the structure?	span
erin	bridge	What is the biggest danger to the project?	risk
erin	bridge	Who is in charge on site?	team
erin	*	Do I have any heart or blood pressure issues?	health
erin	*	What do I do on Saturdays?	weekend
alice	*	What is my blood type?	-
alice	*	Do I have any children?	-
alice	*	What is my shoe size?	-
alice	*	What bank do I use?	-
bob	*	What is my wife's name?	-
bob	*	Do I play a musical instrument?	-
bob	*	What is my email address?	-
bob	*	Which political party do I vote for?	-
carol	*	What is my blood type?	-
carol	*	What programming language do I prefer?	-
carol	*	Which football club do I support?	-
dan	*	What is my passport number?	-
dan	*	Do I have any sisters?	-
dan	*	Which airline seat do I prefer?	-
dan	*	What is my favourite colour?	-
erin	*	What is my blood type?	-
erin	*	Which programming language do I use at work?	-
erin	*	What is my children's school?	-
erin	*	What is my favourite film?	-
erin	*	Which football team do I support?	-
alice	*	What is the weather today in Berlin?	-
bob	*	How do I reset my router?	-
"""

# More questions for fitting the confidence only (never in the held-out
# half): asked as users would, over the same facts, 64 with an answer and 40
# without, many of the latter close to a stored fact (a brother beside a
# sister, a phone number beside a phone, a hotel in Tokyo beside a ryokan in
# Kyoto) or outside memory altogether. --calibrate fits on these and on the
# even-numbered QUESTIONS, and tests on the odd-numbered ones.
CALIBRATION_QUESTIONS = """
alice	*	What's my dog called?	dog
alice	*	Are there any medicines I must avoid?	allergy
alice	*	What do I put in my coffee?	coffee
alice	*	Where does my sister live?	sister
alice	*	What music do I put on when I'm working?	music
alice	*	What phone do I have for work?	phone
alice	*	What plants do I look after?	plant
alice	*	Which seat should you pick for me on a long-haul flight?	seat
alice	*	What time zone am I in?	timezone
alice	trip	Do I have travel insurance?	insurance
alice	trip	Is a visa required for Japan?	visa
alice	thesis	Which software do I write my thesis with?	tool
bob	*	Do I eat animal products?	diet
bob	*	What time do I wake up?	wake
bob	*	What size shirts do I wear?	shirt
bob	*	Which bank am I with?	bank
bob	*	What is my blood group?	blood
bob	*	What size shoes do I wear?	shoes
bob	*	Which language am I studying?	language
bob	*	Which airline do I prefer?	airline
bob	*	What do I build as a hobby?	hobby
bob	*	Do I wear contacts?	glasses
bob	*	How old are my girls?	kids
bob	renovation	What flooring did we pick?	floor
bob	renovation	Do we have permission to build?	permit
bob	launch	Where are launch updates posted?	channel
carol	*	Where do I live?	home
carol	*	Which airline's loyalty programme am I in?	airline
carol	*	What does my husband do?	partner
carol	*	What sport do I do?	sport
carol	*	What's my email?	email
carol	*	When was I born?	birthday
carol	*	How do I feel about dogs?	pet
carol	*	Do I like audiobooks or printed books?	reading
carol	*	What do I need in a hotel room?	hotel
carol	*	What car do I drive?	car
carol	*	What is my native language?	language
carol	*	What do I do on Sundays?	weekend
carol	*	Am I involved in any volunteering?	politics
carol	*	What phone do I have?	phone
carol	bakery	When does the bakery open?	opening
carol	bakery	What kind of oven do we have?	oven
dan	*	Can I drink milk?	allergy
dan	*	How many coffees do I have a day?	coffee
dan	*	What editor do I use?	editor
dan	*	Which shell do I use?	shell
dan	*	What keyboard do I use?	keyboard
dan	*	What kind of books do I read?	reading
dan	*	What pet do we have?	pet
dan	*	How do I get around the city?	car
dan	*	When does my son start school?	kids
dan	*	Where do I live?	home
dan	*	When is my birthday?	birthday
dan	*	Where do I put my savings?	bank
dan	*	Who is my dentist?	doctor
dan	api	How do clients log in to the API?	auth
dan	api	When am I on call?	oncall
erin	*	Which airline do I fly?	airline
erin	*	Where do I live?	home
erin	*	What exercise do I do at night?	sport
erin	*	What coffee do I order?	coffee
erin	*	What am I saving money for?	savings
erin	*	Am I on social media?	social
erin	bridge	What is the deck made of?	material
alice	*	What is my brother's name?	-
alice	*	Where did I go to university?	-
alice	*	What is my salary?	-
alice	*	Do I smoke?	-
alice	*	What is my husband's name?	-
alice	*	Which gym am I a member of?	-
alice	trip	Which hotel are we staying at in Tokyo?	-
alice	thesis	How many pages must the thesis have?	-
alice	*	What is the capital of France?	-
bob	*	Who is my cat's vet?	-
bob	*	What is my favourite movie?	-
bob	*	Where did I grow up?	-
bob	*	How tall am I?	-
bob	*	What is my mother's name?	-
bob	*	Which newspaper do I read?	-
bob	renovation	Who is the electrician?	-
bob	launch	What is the launch budget?	-
bob	*	Can you summarise today's news?	-
carol	*	What is my phone number?	-
carol	*	Do I have children?	-
carol	*	What is my salary?	-
carol	*	Which gym do I go to?	-
carol	*	What is my favourite wine?	-
carol	bakery	What is the bakery's website?	-
carol	*	What is 15 percent of 80?	-
dan	*	What is my wife's name?	-
dan	*	What is my blood type?	-
dan	*	What is my favourite food?	-
dan	*	Which university did I attend?	-
dan	*	What is my shoe size?	-
dan	api	What is the API's uptime target?	-
dan	api	Who reviews my pull requests?	-
dan	*	Translate good morning into Spanish.	-
erin	*	What is my brother's name?	-
erin	*	What is my email address?	-
erin	*	What is my salary?	-
erin	*	Which university did I go to?	-
erin	*	Do I smoke?	-
erin	bridge	What is the bridge's budget?	-
erin	*	What time is it in London?	-
"""

TENANT = "acme"


def rows(block: str) -> list[list[str]]:
    return [line.split("\t") for line in block.strip().splitlines()]


def scope_of(user: str, project: str) -> str:
    return f"{TENANT}:{user}:{project}"


def seed() -> dict[tuple[str, str], str]:
    from aetnaweb.access import SYSTEM
    from memory import services

    ids: dict[tuple[str, str], str] = {}
    for user, project, key, text in rows(FACTS):
        result = services.remember(
            principal=SYSTEM, scope=scope_of(user, project), text=text, force=True
        )
        if not result.record_ids:
            raise SystemExit(f"fact not stored: {user} {key}: {text!r}")
        ids[(user, key)] = result.record_ids[0]
    return ids


def evaluate(
    ids: dict[tuple[str, str], str],
    *,
    semantic: bool,
    min_score: float,
    verbose: bool,
    min_confidence: float | None = None,
    questions: list[list[str]] | None = None,
) -> dict[str, float]:
    from django.test import override_settings

    from aetnaweb.access import SYSTEM
    from memory import ranking, services

    owner = {record_id: user for (user, _), record_id in ids.items()}
    at1 = at3 = positives = negatives = false_positives = leaks = 0
    confident = ranking.DEFAULT_MIN_CONFIDENCE if min_confidence is None else min_confidence
    with override_settings(AETNAWEB_SEMANTIC_RECALL=semantic):
        for user, project, question, key in questions or rows(QUESTIONS):
            result = services.recall(
                principal=SYSTEM,
                scope=scope_of(user, project),
                query=question,
                limit=3,
                min_score=min_score,
                min_confidence=confident,
            )
            returned = result.record_ids
            leaks += sum(1 for rid in returned if owner.get(rid) != user)
            if key == "-":
                negatives += 1
                false_positives += int(bool(returned))
                missed = bool(returned)
            else:
                positives += 1
                want = ids[(user, key)]
                at1 += int(returned[:1] == [want])
                at3 += int(want in returned)
                missed = want not in returned
            if verbose and missed:
                top = [
                    (c.content[:50], c.score, c.parts.get("semantic", 0.0)) for c in result.returned
                ]
                print(
                    f"  miss [{'hybrid' if semantic else 'lexical'}] {user}: {question!r} want {key}: {top}"
                )
    return {
        "recall@1": at1 / positives,
        "recall@3": at3 / positives,
        "false_positive_rate": false_positives / negatives,
        "positives": positives,
        "negatives": negatives,
        "false_positives": false_positives,
        "cross_user_leaks": leaks,
    }


Table = list[tuple[bool, str | None, list[tuple[str, tuple[float, ...], float]]]]

# The confidence models --calibrate fits: the product's (memory.ranking: the
# match alone, or the word share alone without a model) and, measured beside
# it, the match with its margin over the best other candidate.
MODELS = ("match", "match+margin")


def margins(values: list[float]) -> list[float]:
    """Each candidate's match minus the best other candidate's (SEMANTIC_FLOOR when alone).

    A record that is not a candidate matches at most the floor.
    """
    from memory import ranking

    ordered = sorted(values, reverse=True)
    best = ordered[0] if ordered else 0.0
    second = ordered[1] if len(ordered) > 1 else ranking.SEMANTIC_FLOOR
    return [value - (second if value >= best else best) for value in values]


def candidate_table(
    ids: dict[tuple[str, str], str], questions: list[list[str]], model: str = "match"
) -> Table:
    """Each question's candidates in rank order: (record ID, the features its confidence calibrates, relevance).

    Recalled with no thresholds, so every candidate is seen. The features are
    :func:`memory.ranking.match` with semantic recall on (and its margin for
    "match+margin"), the word share with it off.
    """
    from django.conf import settings

    from aetnaweb.access import SYSTEM
    from memory import ranking, services

    semantic = settings.AETNAWEB_SEMANTIC_RECALL
    table = []
    for user, project, question, key in questions:
        result = services.recall(
            principal=SYSTEM,
            scope=scope_of(user, project),
            query=question,
            limit=3,
            min_score=0.0,
            min_confidence=0.0,
        )
        values = [
            ranking.match(c.parts["semantic"], c.parts["word_share"])
            if semantic
            else c.parts["word_share"]
            for c in result.candidates
        ]
        leads = margins(values)
        table.append(
            (
                key == "-",
                None if key == "-" else ids[(user, key)],
                [
                    (
                        c.record_id,
                        (value, lead) if model == "match+margin" and semantic else (value,),
                        c.parts["relevance"],
                    )
                    for c, value, lead in zip(result.candidates, values, leads, strict=True)
                ],
            )
        )
    return table


def fit_logistic(samples: list[tuple[tuple[float, ...], int]]) -> list[float]:
    """Logistic regression (intercept first) by Newton's method on the log loss, lightly ridged.

    The intercept is not ridged; the ridge keeps the fit finite when a
    feature separates the samples.
    """
    import numpy as np

    x = np.array([[1.0, *values] for values, _ in samples])
    y = np.array([label for _, label in samples], dtype=float)
    beta = np.zeros(x.shape[1])
    ridge = 1e-2 * np.eye(x.shape[1])
    ridge[0, 0] = 0.0
    for _ in range(200):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        gradient = x.T @ (p - y) + ridge @ beta
        hessian = (x * (p * (1 - p))[:, None]).T @ x + ridge
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return [float(value) for value in beta]


def probability(coefficients: list[float], values: tuple[float, ...]) -> float:
    import math

    logit = coefficients[0] + sum(c * v for c, v in zip(coefficients[1:], values, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))


# Each question reduced to what a threshold decides (as recall does, a
# candidate returns when its confidence reaches it): (no answer stored?, the
# best confidence of any candidate, top-1 correct?, top-1's confidence).
Decided = list[tuple[bool, float, bool, float]]


def decided(table: Table, coefficients: list[float]) -> Decided:
    rows = []
    for negative, want, candidates in table:
        confidences = [probability(coefficients, values) for _rid, values, _rel in candidates]
        rows.append(
            (
                negative,
                max(confidences, default=0.0),
                bool(candidates) and candidates[0][0] == want,
                confidences[0] if confidences else 0.0,
            )
        )
    return rows


def answer_at(rows: Decided, threshold: float) -> tuple[int, int, int, int]:
    """(no-answer questions answered, no-answer questions, correct top-1 kept, correct top-1 unthresholded)."""
    answered = negatives = kept = correct = 0
    for negative, best, right, top in rows:
        if negative:
            negatives += 1
            answered += int(best >= threshold)
        elif right:
            correct += 1
            kept += int(top >= threshold)
    return answered, negatives, kept, correct


def choose_threshold(rows: Decided) -> float | None:
    """The threshold keeping the most correct first answers with at most 10% of no-answers answered."""
    best: tuple[int, float] | None = None
    for step in range(1, 100):
        threshold = step / 100
        answered, negatives, kept, _ = answer_at(rows, threshold)
        if answered <= 0.10 * negatives and (best is None or kept > best[0]):
            best = (kept, threshold)
    return None if best is None else best[1]


FOLDS = 8


def calibrate(ids: dict[tuple[str, str], str]) -> None:
    """Fit the confidence on the calibration set; choose the threshold there; test on the held-out half.

    The calibration set is the even-numbered QUESTIONS and every
    CALIBRATION_QUESTIONS; the held-out half, the odd-numbered QUESTIONS, is
    only scored. The threshold is chosen on out-of-fold confidences (each
    calibration question scored by a model fitted without its fold), which
    estimate how the model does on questions it has not seen better than
    its fit on its own samples; the coefficients are then fitted on the whole
    calibration set. Each of MODELS with semantic recall on; the word-share
    model with it off.
    """
    from django.test import override_settings

    from memory import ranking

    questions = rows(QUESTIONS)
    halves = {
        "calibration": questions[0::2] + rows(CALIBRATION_QUESTIONS),
        "held-out": questions[1::2],
    }

    def samples(table: Table) -> list[tuple[tuple[float, ...], int]]:
        return [
            (values, int(rid == want))
            for _negative, want, candidates in table
            for rid, values, _relevance in candidates[:10]
        ]

    for semantic, model in [*((True, name) for name in MODELS), (False, "word share")]:
        with override_settings(AETNAWEB_SEMANTIC_RECALL=semantic):
            tables = {name: candidate_table(ids, half, model) for name, half in halves.items()}
        calibration = tables["calibration"]
        out_of_fold: Decided = []
        for fold in range(FOLDS):
            train = [q for index, q in enumerate(calibration) if index % FOLDS != fold]
            test = [q for index, q in enumerate(calibration) if index % FOLDS == fold]
            out_of_fold += decided(test, fit_logistic(samples(train)))
        coefficients = fit_logistic(samples(calibration))
        print(
            f"{'hybrid' if semantic else 'lexical'}, {model}: fitted on "
            f"{len(samples(calibration))} candidates of {len(calibration)} questions "
            f"(LEXICAL_WEIGHT {ranking.LEXICAL_WEIGHT}): coefficients (intercept first) "
            + ", ".join(f"{value:.2f}" for value in coefficients)
        )
        threshold = choose_threshold(out_of_fold)
        if threshold is None:
            print("  no threshold keeps the no-answer rate at or under 10%")
            continue
        print(
            f"  threshold ({FOLDS}-fold out-of-fold: most correct top-1 kept, "
            f"<=10% no-answers answered): {threshold:.2f}"
        )
        scored = {"out-of-fold": out_of_fold} | {
            name: decided(table, coefficients) for name, table in tables.items()
        }
        for name, decisions in scored.items():
            answered, negatives, kept, correct = answer_at(decisions, threshold)
            print(
                f"  {name:12} at {threshold:.2f}: no-answer questions answered "
                f"{answered}/{negatives} ({answered / negatives:.3f}); correct top-1 kept "
                f"{kept}/{correct} ({kept / max(correct, 1):.3f})"
            )


def embedding_cost(samples: int = 100) -> tuple[float, float]:
    from memory import embeddings

    texts = [text for _, _, _, text in rows(FACTS)][:samples]
    embeddings.embed("warm up")
    wall, cpu = [], []
    for text in texts:
        w, c = time.perf_counter(), time.process_time()
        embeddings.embed(text)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-score", type=float, default=0.0)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--min-confidence",
        type=float,
        help="another confidence threshold than the default (0: rank only, never abstain)",
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="fit the confidence model on half the questions and test it on the other half",
    )
    parser.add_argument("--floor", type=float, help="try another SEMANTIC_FLOOR (calibration)")
    parser.add_argument("--full", type=float, help="try another SEMANTIC_FULL (calibration)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="aetnaweb-quality-"))
    try:
        # bench/ is on the path when the script runs (a test loads this file for its data only).
        from memory_scale import setup_django

        setup_django(directory, "quality.sqlite3")
        from memory import ranking, vectors

        if args.floor is not None:
            ranking.SEMANTIC_FLOOR = args.floor
        if args.full is not None:
            ranking.SEMANTIC_FULL = args.full
        state = vectors.status()
        if not state.available:
            raise SystemExit(f"semantic recall unavailable: {state.detail}")
        ids = seed()
        if args.calibrate:
            calibrate(ids)
            return
        facts, questions = rows(FACTS), rows(QUESTIONS)
        print(
            f"{len(facts)} facts, {len({r[0] for r in facts})} users, "
            f"{len({(r[0], r[1]) for r in facts})} scopes; {len(questions)} questions; "
            f"min_score {args.min_score}; engine {state.engine}, model {state.model}; "
            f"semantic floor {ranking.SEMANTIC_FLOOR}, full {ranking.SEMANTIC_FULL}"
        )
        results = {
            mode: evaluate(
                ids,
                semantic=mode == "hybrid",
                min_score=args.min_score,
                verbose=args.verbose,
                min_confidence=args.min_confidence,
            )
            for mode in ("lexical", "hybrid")
        }
        print(f"{'mode':8} {'recall@1':>9} {'recall@3':>9} {'FP rate':>8} {'leaks':>6}")
        for mode, r in results.items():
            print(
                f"{mode:8} {r['recall@1']:9.3f} {r['recall@3']:9.3f} "
                f"{r['false_positive_rate']:8.3f} {r['cross_user_leaks']:6d}"
            )
        gain = results["hybrid"]["recall@3"] - results["lexical"]["recall@3"]
        print(
            f"hybrid recall@3 gain over lexical: {gain:+.3f} (positives {results['hybrid']['positives']}, negatives {results['hybrid']['negatives']})"
        )
        wall, cpu = embedding_cost()
        print(
            f"embedding cost per text (p50): {wall:.2f} ms wall, {cpu:.2f} ms CPU; load avg {os.getloadavg()[0]:.2f}"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
