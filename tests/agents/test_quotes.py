"""Quotations the agents take from a narrative: exact words, about the complaint, and a cut that
reads as a phrase."""

from __future__ import annotations

import re

from agents.signals import MAX_QUOTE, quote_of

LONG = ("As you are aware, Navient has faced multiple lawsuits alleging deceptive loan servicing practices that "
        "harmed borrowers practices that include steering borrowers into costly forbearance options instead of "
        "income-driven repayment plans, failing to properly advise borrowers of their rights, and mismanaging "
        "accounts in ways that led to unnecessary interest accrual and defaults.")


def test_a_window_cut_from_a_long_sentence_ends_on_a_word_that_closes_a_phrase():
    quote = quote_of(LONG, re.search("deceptive", LONG))
    assert quote in LONG and len(quote) <= MAX_QUOTE
    assert quote.endswith("failing to properly advise borrowers of their rights")  # not "…rights, and"


def test_a_short_sentence_is_quoted_whole_and_a_cut_never_drops_below_half_the_window():
    assert quote_of("I want my money back.") == "I want my money back."
    words = " ".join(["and"] * 200)  # nothing but dangling words: the plain window is kept
    assert quote_of(words) and words.startswith(quote_of(words))


def test_a_salutation_opening_the_sentence_is_left_out_of_the_quote():
    sentence = ("Dear Consumer Financial Protection Bureau, Synchrony bank Interest charges me two times with "
                "very large amount on XX/XX/XXXX {$2800.00}.")
    assert quote_of(sentence, re.search(r"\{\$2800", sentence)) == sentence.split(", ", 1)[1]
    assert quote_of("To Whom It May Concern: my account was closed.") == "my account was closed."
    assert quote_of("Dear Sir,") == "Dear Sir,"  # nothing after it: kept as it is
    # The match inside the salutation itself keeps the whole sentence (the quote must hold the match).
    sentence = "Dear fraud department, please help."
    assert quote_of(sentence, re.search("fraud", sentence)) == sentence


LETTER = ("To : XXXX XXXX XXXX Complaint Resolution Manager Re : {$350000.00} wire transfer to XXXX XXXX XXXX "
          "XX/XX/2018 Dear Mr. XXXX : My name is XXXX XXXX, and I am the sender of the above referenced wire "
          "transfer to BB & T Bank.")


def test_a_pasted_letter_s_heading_and_body_are_quoted_apart_at_its_salutation():
    """A real narrative (second held-out set): the heading and the salutation of a pasted letter run into
    one sentence; the quote keeps the side of "Dear Mr. XXXX :" that holds the match."""
    heading = quote_of(LETTER, re.search("wire transfer", LETTER))
    assert heading == ("To : XXXX XXXX XXXX Complaint Resolution Manager Re : {$350000.00} wire transfer to XXXX "
                       "XXXX XXXX XX/XX/2018")
    body = quote_of(LETTER, re.search("sender", LETTER))
    assert body == "My name is XXXX XXXX, and I am the sender of the above referenced wire transfer to BB & T Bank."
    assert heading in LETTER and body in LETTER
    # "dear" inside a sentence that is no salutation changes nothing
    sentence = "My dear mother, who is 80, was charged twice."
    assert quote_of(sentence, re.search("charged", sentence)) == sentence


GLUED = ("I have mailed off letters to the credit bureaus continuously and thus far I have not gotten a response.My "
         "name is XXXX XXXX and I am filing this complaint for falsely reporting misleading information.There is "
         "no third party involved.Please review the uploaded letters.")


def test_sentences_glued_without_a_space_are_quoted_apart_around_the_match():
    """Read in ten analyses of the blind set: a misconduct finding quoted all four glued sentences."""
    assert quote_of(GLUED, re.search("falsely", GLUED)) == \
        "My name is XXXX XXXX and I am filing this complaint for falsely reporting misleading information."
    assert quote_of(GLUED, re.search("continuously", GLUED)) == \
        "I have mailed off letters to the credit bureaus continuously and thus far I have not gotten a response."
    # Without a match (the sentence model's reading) the whole sentence is the evidence.
    assert quote_of(GLUED) == GLUED


def test_a_glued_part_shorter_than_a_phrase_and_abbreviations_are_not_cut_off():
    short = "I disputed it twice.No.They kept the charge on my statement and never answered my letters."
    assert quote_of(short, re.search("twice", short)) == short  # "I disputed it twice." is under 25 characters
    dotted = "The U.S.Bank branch and the bank's e.g.Statement pages say the payment was received on time."
    assert quote_of(dotted, re.search("payment", dotted)) == dotted
